"""A misspelt subcommand or flag gets a "did you mean" (core/suggest.h) and exit 3, on every command."""
import pytest

from kc_env import kc


def test_unknown_subcommand_suggests_the_closest():
    r = kc("tset", check=False)
    assert r.returncode == 3 and "unknown command 'tset'" in r.stderr and 'did you mean "test"' in r.stderr


@pytest.mark.parametrize("cmd,typo,want", [("test", "--nosie", "--noise"), ("compare", "--jsno", "--json"),
                                           ("record", "--goldne", "--golden"), ("calibrate", "--hepl", "--help")])
def test_unknown_flag_suggests_the_closest(cmd, typo, want):
    r = kc(cmd, "x", typo, "y", check=False)
    assert r.returncode == 3, r.stderr
    assert f'unknown flag {typo} (did you mean "{want}"?)' in r.stderr, r.stderr


def test_no_suggestion_for_far_off_words():
    r = kc("test", "x", "--zzzzzzzzzz", check=False)
    assert r.returncode == 3 and "did you mean" not in r.stderr
