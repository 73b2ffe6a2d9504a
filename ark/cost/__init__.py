"""Money: prices (`prices`), ledgers of what was paid (`ledger`), the spending cap (`cap`), prompt tokens
before a reply counts them (`tokens`) and the forecast's arithmetic (`forecast`). Below `ark.llm`, which
asks it before every paid call; it reads no run directory and no Hydra config."""
