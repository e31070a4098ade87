"""`python -m tests.albert_tf.training.paused_pretrain ARGS...`: `albert-pretrain ARGS...` that, run
with `pause_env(step, folder)`, stops once it has trained `step`: it writes `folder`/paused and waits
there until `folder`/go exists. A test kills it there, or signals it and then writes `go`: where the
kill or the signal lands is then known, however far a loaded machine let the run go while the test
polled for a checkpoint. Without the variable it is albert-pretrain, unchanged.
"""

import os
import pathlib
import sys
import time

PAUSE_ENV = "ALBERT_TEST_PAUSE"


def pause_env(step: int, folder) -> dict[str, str]:
    """The environment entry that pauses the run after step `step`, saying so in `folder`."""
    return {PAUSE_ENV: f"{step}:{folder}"}


def _main(argv: list[str]) -> None:
    from albert_tf.cli import pretrain
    from albert_tf.training import loop

    if os.environ.get(PAUSE_ENV):
        step, folder = os.environ[PAUSE_ENV].split(":", 1)
        folder = pathlib.Path(folder)
        train_steps = loop.Trainer.train_steps

        def pausing(self, iterator, num_steps):
            if self.current_step == int(step):
                (folder / "paused").write_text(f"{self.current_step}\n")
                while not (folder / "go").exists():  # signals are handled meanwhile
                    time.sleep(0.01)
            return train_steps(self, iterator, num_steps)

        loop.Trainer.train_steps = pausing
    sys.argv = ["albert-pretrain", *argv]
    pretrain.run()


if __name__ == "__main__":
    _main(sys.argv[1:])
