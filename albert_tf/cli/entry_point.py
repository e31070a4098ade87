"""How every console script of the project starts: its own absl FlagValues, one parser.

Each script keeps its flags in a `flags.FlagValues()` of its own, because several define the same
names (`--input_file`, ...) and one process (a test run) may import them all. absl's `app.run`
still wants its global FLAGS parsed, so they are parsed with their defaults (logging flags).
"""

from __future__ import annotations

import os
import sys
from typing import Callable

from absl import app, flags


def run_main(main: Callable, flag_values: flags.FlagValues, doc: str | None) -> None:
    """Runs `main(argv)` as absl's `app.run` does, with `flag_values` parsed from the command line.

    `--help` prints the script's docstring and its flags; a bad flag exits with status 2 and a
    one-line message.
    """
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

    def parse(argv: list[str]) -> list[str]:
        if any(arg in ("-h", "--help", "-help", "--helpfull") for arg in argv[1:]):
            if doc:
                print(doc)
            print(flag_values.get_help())
            sys.exit(0)
        try:
            remaining = flag_values(argv)
        except flags.Error as error:
            print(f"error: {error} (see --help)", file=sys.stderr)
            sys.exit(2)
        flags.FLAGS(argv[:1])
        return remaining

    app.run(main, flags_parser=parse)
