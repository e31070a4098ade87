"""How every console script of the project starts (`run_main`, the one entry point: the
pretraining, export, conversion, data-prep and fine-tuning tools alike): its own absl FlagValues,
one parser, one --help and --verbose, one way to report a user's mistake.

Each script keeps its flags in a `flags.FlagValues()` of its own, because several define the same
names (`--input_file`, ...) and one process (a test run) may import them all. absl's `app.run`
still wants its global FLAGS parsed, so they are parsed with their defaults (logging flags).

A user's mistake (`albert_tf.utils.errors.UserError`, a bad flag, a missing file, a full disk, Ctrl-C)
ends the script with one line on stderr, `error: <what and where>`, and one convention of exit
codes for every script: 2 for usage (a flag wrong, missing or unknown), 1 for a failure at run
time (a file, a value in it, a busy or unusable folder, the machine), 130 for an interrupt.
`--verbose` (every script has it) or ALBERT_TF_VERBOSE=1 adds the traceback. Any other exception
is a bug of ours and keeps its traceback.
"""

from __future__ import annotations

import sys
import traceback
from typing import Callable

from absl import app, flags

from albert_tf.cli.release_flags import apply_release_flags, define_release_flags
from albert_tf.utils.quiet import (VERBOSE_ENV, quiet_tensorflow, set_tensorflow_log_level, set_verbose,
                                   settle_tensorflow_load, show_tensorflow_start_up, verbose)

VERBOSE_HELP = f"Show tracebacks of user errors (also: {VERBOSE_ENV}=1) and more log."


def quiet_logs() -> None:
    """A user sees the progress bar, the summary and real warnings: TensorFlow's C++ start-up lines
    and INFO logs (absl's and TensorFlow's) are shown only with --verbose."""
    if verbose():
        from absl import logging

        logging.set_verbosity(logging.INFO)
        return
    quiet_tensorflow()
    from absl import logging

    logging.set_verbosity(logging.WARNING)


def report_errors(main: Callable, value_errors_are_users: bool = False) -> Callable:
    """`main` wrapped so that a user's error becomes `error: <one line>` and its exit code: 2 for
    a flag (usage), 1 for a failure at run time (a file, a value in it, the machine), 130 for
    Ctrl-C. With `value_errors_are_users`, any ValueError is the user's too (exit code 1): the
    fine-tuning scripts, whose readers and checks raise ValueErrors naming the file or value."""
    from albert_tf.utils.errors import INPUT_EXIT_CODE, one_line, reason

    def guarded(*args, **kwargs):
        try:
            return main(*args, **kwargs)
        except (Exception, KeyboardInterrupt) as error:
            described = one_line(error)
            if described is None and value_errors_are_users and isinstance(error, ValueError):
                described = reason(error), INPUT_EXIT_CODE
            if described is None:
                raise
            message, code = described
            sys.stdout.flush()
            if verbose():
                traceback.print_exc()
            print(f"error: {message}", file=sys.stderr, flush=True)
            sys.exit(code)

    return guarded


def define_common_flags(flag_values: flags.FlagValues) -> None:
    """--verbose, and the release's names of the flags `flag_values` holds: what every script has."""
    if "verbose" not in flag_values:
        flags.DEFINE_bool("verbose", False, VERBOSE_HELP, flag_values=flag_values)
    define_release_flags(flag_values)


def flag_error_line(error: Exception) -> str:
    """absl's message of a bad command line as one line (absl prefixes some, a --flagfile it cannot
    open, with "ERROR::")."""
    lines = [line.strip().removeprefix("ERROR::").strip() for line in str(error).splitlines() if line.strip()]
    return "; ".join(lines)


def parse_command_line(flag_values: flags.FlagValues, argv: list[str], doc: str | None = None,
                       pass_unknown_flags: bool = False) -> list[str]:
    """The one parser of every console script's command line `argv` (argv[0] the program's name)
    into `flag_values`, also for a tool run in-process (`finetune.cli.finetune`): --help prints
    `doc` and the flags and exits 0; only this command line's values are kept (a process may have
    run others); --verbose is recorded; the release's flag names are applied. A bad flag raises
    absl's `flags.Error`. Returns the arguments left (with `pass_unknown_flags`, the unknown flags)."""
    define_common_flags(flag_values)
    if any(arg in ("-h", "--help", "-help", "--helpfull") for arg in argv[1:]):
        if doc:
            print(doc)
        print(flag_values.get_help())
        sys.exit(0)
    flag_values.unparse_flags()  # a command line's own values only, in a process that ran others
    remaining = flag_values(argv, known_only=pass_unknown_flags)
    set_verbose(flag_values["verbose"].value)
    apply_release_flags(flag_values)
    return remaining


def run_main(
    main: Callable, flag_values: flags.FlagValues, doc: str | None, pass_unknown_flags: bool = False,
    value_errors_are_users: bool = False,
) -> None:
    """Runs `main(argv)` as absl's `app.run` does, with `flag_values` parsed from the command line.

    `--help` prints the script's docstring and its flags; a bad flag exits with status 2 and a
    one-line message; so does every user error `main` raises (see the module's docstring). With
    `pass_unknown_flags`, flags that are not the script's reach `main` in `argv` (another tool's
    options, such as Beam's); `main` must refuse them where they mean nothing. With
    `value_errors_are_users`, see `report_errors`.
    """
    set_tensorflow_log_level()
    define_common_flags(flag_values)

    def parse(argv: list[str]) -> list[str]:
        try:
            remaining = parse_command_line(flag_values, argv, doc, pass_unknown_flags)
        except flags.Error as error:  # one line, even for several missing flags (one line each in absl)
            print(f"error: {flag_error_line(error)} (see --help)", file=sys.stderr)
            sys.exit(2)
        flags.FLAGS(argv[:1])
        quiet_logs()
        return remaining

    app.run(report_errors(main, value_errors_are_users), flags_parser=parse)


# Every script loads TensorFlow in its main, after the flags are parsed: from the import of a script
# on, its start-up lines are captured, unless the user asked for them (--verbose, read here before
# the flags are parsed because TensorFlow's first lines may come before), and it loads settled (the
# script's process is ours: albert_tf.utils.quiet).
settle_tensorflow_load()
if verbose() or "--verbose" in sys.argv[1:]:
    show_tensorflow_start_up()
else:
    quiet_tensorflow()
