"""Fusion of agents' lists on hand-made inputs: votes first, then earliest position (ark/fusion.py)."""

import pytest

from ark.fusion import fuse


def test_votes_dominate_position():
    # node 9 is last in both lists but has 2 votes; everything else has 1.
    assert fuse([[1, 2, 9], [3, 9]]) == [9, 1, 3, 2]


def test_vote_tie_broken_by_rank_within_own_list():
    # All nodes have one vote. Ranks in own list: 1->0, 2->1, 3->2, 4->0, 5->1.
    # Same rank 0: 1 (agent 0) before 4 (agent 1); then 2 before 5; then 3.
    assert fuse([[1, 2, 3], [4, 5]]) == [1, 4, 2, 5, 3]


def test_concat_tie_break_favours_earlier_agents():
    assert fuse([[1, 2, 3], [4, 5]], tie_break="concat") == [1, 2, 3, 4, 5]


def test_tie_uses_best_rank_over_agents():
    # 7 and 8 both have 2 votes. 7: ranks 2 and 0 -> best 0. 8: ranks 0 and 1 -> best 0.
    # Tie on best rank -> first index in concatenation: 8 at 0, 7 at 2 -> 8 first.
    # 5 has one vote, 6 one vote (rank 1 vs rank 1 -> concat index 1 vs 4).
    assert fuse([[8, 5, 7], [7, 8, 6]]) == [8, 7, 5, 6]
    # Here 7's best rank (0) beats 8's (1), with equal votes.
    assert fuse([[5, 8, 7], [7, 6, 8]]) == [7, 8, 5, 6]


def test_three_agents_paper_setting_and_top():
    lists = [[10, 11, 12], [11, 13], [14, 11, 10]]
    # votes: 11 -> 3, 10 -> 2, others 1; 14 and 13 have rank 0 / 1 in own lists, 12 rank 2.
    assert fuse(lists) == [11, 10, 14, 13, 12]
    assert fuse(lists, top=2) == [11, 10]
    assert fuse(lists, top=0) == []


def test_duplicates_inside_one_list_vote_once():
    assert fuse([[1, 1, 1], [2, 3], [3]]) == [3, 1, 2]


def test_empty_inputs():
    assert fuse([]) == []
    assert fuse([[], []]) == []
    assert fuse([[], [4, 2]]) == [4, 2]


def test_single_agent_is_identity():
    assert fuse([[5, 3, 9, 1]]) == [5, 3, 9, 1]


def test_bad_arguments_name_choices():
    with pytest.raises(ValueError, match="'list', 'concat'"):
        fuse([[1]], tie_break="rrf")
    with pytest.raises(ValueError, match="top"):
        fuse([[1]], top=-1)
