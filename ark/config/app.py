"""Hydra's own command line for a task, callable with an argument list: what ``@hydra.main`` does.

    from ark.config.app import launch
    from ark.config.evaluation import job
    launch(job, "config", ["-m", "experiment=ablation", "graph=demo"])   # = python experiments/run.py -m ...

`launch` hands the arguments to Hydra exactly as a decorated script's command line (``-m`` sweeps,
launchers, ``--cfg job``, ``hydra.*`` overrides), over the configs of `ark.config.location.conf_dir`.
``ark run -m`` and ``ark diagnose -m`` go through it, so a sweep from the ``ark`` command is the sweep
``python experiments/run.py -m`` makes. ``job_name`` is Hydra's ``hydra.job.name`` (the name of the
job's log file), which a decorated script takes from its own file name.

`command_line` is what a decorated script's command line goes through before Hydra sees it
(``sys.argv = command_line(sys.argv, "config")``): the overrides' keys are checked (one line naming the
closest valid key, `ark.config.keys`), and a sweep is prepared (`ark.config.sweep.prepare`: directories,
forecast, confirmation, ledger), so ``python experiments/run.py -m ...`` is the sweep ``ark run -m``
launches. For a single run it also notes which directories of the run's ``out_dir`` do not exist yet
(`ark.config.job_dirs`): Hydra makes its run directory before the job starts, so a job that stops before its
run began (a bad setting, a missing file, a refused directory) removes exactly what Hydra made for it,
wherever ``out_dir=`` points (`ark.config.evaluation.job`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence

from ark.config.job_dirs import note_before_job
from ark.config.location import conf_dir

def launch(task: Callable, config_name: str, args: Sequence[str], job_name: str, prog: str = "ark") -> None:
    """Run ``task`` under Hydra's command line with ``args`` (Hydra exits the process on its own errors)."""
    import hydra

    main = hydra.main(version_base="1.3", config_path=str(conf_dir()), config_name=config_name)(task)
    saved = sys.argv
    sys.argv = [prog, *args, f"hydra.job.name={job_name}"]
    try:
        main()
    finally:
        sys.argv = saved


def exit_status(argv: Sequence[str], config_name: str) -> int:
    """The exit status of a decorated script once Hydra returned: for a sweep (``-m``), 3 when one of its
    runs is not complete (`ark.config.sweep.exit_status`); 0 otherwise (a single run that is not
    complete has exited with 3 from its job, `ark.config.evaluation.job`)."""
    from hydra._internal.utils import get_args_parser

    from ark.config.sweep import exit_status as sweep_status

    args = get_args_parser().parse_args(list(argv[1:]))
    if not args.multirun or args.help or args.hydra_help or args.cfg or args.info:
        return 0
    return sweep_status(args.overrides, config_name)


def command_line(argv: Sequence[str], config_name: str) -> list[str]:
    """``argv`` (a script's ``sys.argv``) as Hydra should see it: the same, with the overrides a prepared
    sweep adds; an unknown key stops the process with one line (exit 2), a bad setting of a paid sweep with
    its lines, ``estimate=true`` of a sweep once the forecast is printed and ``pilot=true`` once its pilots
    ran (exit 0; 3 when a pilot did not finish). Hydra's own flags (``--cfg``, ``--help``...) and the
    errors Hydra reports itself (an unknown option) pass to Hydra."""
    from hydra._internal.utils import get_args_parser

    from ark.config.compose import compose, one_line
    from ark.config.sweep import prepare

    args = get_args_parser().parse_args(list(argv[1:]))
    if args.help or args.hydra_help or args.cfg or args.info or args.shell_completion or args.experimental_rerun:
        return list(argv)
    try:
        if not args.multirun:
            cfg = compose(args.overrides, config_name)
            if cfg.get("out_dir") is not None:   # Hydra's run directory (hydra.run.dir), made before the job
                note_before_job(str(cfg.out_dir))
            return list(argv)
        overrides = prepare(args.overrides, config_name)
    except (ValueError, FileNotFoundError) as e:
        print(f"error: {one_line(e)}", file=sys.stderr)
        raise SystemExit(2) from None
    except Exception as e:
        if type(e).__module__.split(".")[0] not in ("hydra", "omegaconf"):
            raise
        return list(argv)   # a bad option name or override value: Hydra says so in its own words
    if overrides is None:
        raise SystemExit(0)
    given = set(args.overrides)
    return [argv[0], *(a for a in argv[1:] if a not in given), *overrides]
