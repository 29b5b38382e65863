"""The command line as a new user meets it: bad input gets an argparse-style error (exit 2, no
traceback), a missing optional package names the extra to install, and every option says what it does."""
import argparse
import importlib
import subprocess
import sys

import pytest

from quickreduce.cli import __main__ as cli
from quickreduce.cli import accuracy


def _error(capsys, fn, *argv) -> str:
    """Run `fn(argv)`, expecting an argparse error or a clean nonzero exit; the message it printed."""
    try:
        code = fn(list(argv))
    except SystemExit as exc:
        code = exc.code
    assert code not in (0, None), f"{argv} exited {code}"
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err + captured.out
    return captured.err


def test_version(capsys):
    import quickreduce

    assert cli.main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"quickreduce {quickreduce.__version__}"


def test_unknown_command_is_named(capsys):
    err = _error(capsys, cli.main, "benchh")
    assert "'benchh'" in err and "bench" in err


@pytest.mark.parametrize("argv, says", [
    (["--numel", "0"], "--numel"),
    (["--numel", "-5"], "--numel"),
    (["--world-sizes", "0"], "--world-sizes"),
    (["--world-sizes", "2,x"], "--world-sizes"),
    (["--world-sizes", "16"], "8"),  # the build's limit, read from the extension
])
def test_accuracy_refuses_bad_sizes(capsys, argv, says):
    err = _error(capsys, accuracy.main, *argv)
    assert says in err


def test_accuracy_world_size_limit_is_the_builds():
    from quickreduce import _C

    assert accuracy.parse_world_sizes(str(_C.MAX_WORLD_SIZE)) == [_C.MAX_WORLD_SIZE]
    with pytest.raises(argparse.ArgumentTypeError):
        accuracy.parse_world_sizes(str(_C.MAX_WORLD_SIZE + 1))
    with pytest.raises(argparse.ArgumentTypeError):
        accuracy.parse_world_sizes("1")


def test_accuracy_cuda_without_gpus_fails(capsys, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)
    err = _error(capsys, accuracy.main, "--device", "cuda", "--world-sizes", "2", "--numel", "1024")
    assert "GPU" in err


def test_accuracy_cuda_with_too_few_gpus_for_every_world_size_fails(capsys, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    err = _error(capsys, accuracy.main, "--device", "cuda", "--world-sizes", "4,8", "--numel", "1024")
    assert "GPU" in err


@pytest.mark.parametrize("command", [["bench", "--from-csv"], ["tune", "--from-csv"], ["e2e", "--from-csv"]])
def test_from_csv_missing_file(capsys, tmp_path, command):
    missing = tmp_path / "nope.csv"
    err = _error(capsys, cli.main, *command, str(missing))
    assert str(missing) in err and ("no such file" in err.lower() or "not found" in err.lower())


@pytest.mark.parametrize("package", ["ml_dtypes", "matplotlib", "rich"])
def test_missing_extra_names_the_install(capsys, monkeypatch, package):
    """A tool that needs an optional package that is not installed says how to install it."""
    def needs_it(argv):
        importlib.import_module(package)  # as the tools import them, lazily
        return 0

    monkeypatch.setitem(sys.modules, package, None)  # makes the import fail as if not installed
    monkeypatch.setattr(accuracy, "main", needs_it)
    err = _error(capsys, cli.main, "accuracy")
    assert package in err and "pip install 'quickreduce[cli]'" in err


def test_missing_e2e_extra_names_its_install(capsys, monkeypatch):
    def needs_it(argv):
        import transformers  # noqa: F401
        return 0

    from quickreduce.cli import e2e

    monkeypatch.setitem(sys.modules, "transformers", None)
    monkeypatch.setattr(e2e, "main", needs_it)
    err = _error(capsys, cli.main, "e2e")
    assert "transformers" in err and "pip install 'quickreduce[e2e]'" in err


def test_other_import_errors_are_not_hidden(monkeypatch):
    """Only the optional extras get the install hint; a broken module still raises."""
    def broken(argv):
        import quickreduce_no_such_module  # noqa: F401

    monkeypatch.setattr(accuracy, "main", broken)
    with pytest.raises(ModuleNotFoundError):
        cli.main(["accuracy"])


def _actions(parser: argparse.ArgumentParser):
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        yield action
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _actions(sub)


def test_every_option_has_help():
    missing = []
    for command in cli.COMMANDS:
        module = importlib.import_module(f"quickreduce.cli.{command.replace('-', '_')}")
        assert hasattr(module, "build_parser"), f"quickreduce {command}: no build_parser()"
        for action in _actions(module.build_parser()):
            if not (action.help or "").strip():
                missing.append(f"{command} {'/'.join(action.option_strings) or action.dest}")
    assert not missing, f"options without help text: {missing}"


def test_module_entry_point_runs():
    """`python -m quickreduce.cli --version` (the console script calls the same main)."""
    out = subprocess.run([sys.executable, "-m", "quickreduce.cli", "--version"], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0 and out.stdout.startswith("quickreduce "), out.stderr
