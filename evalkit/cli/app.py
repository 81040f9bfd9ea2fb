"""The command group. An `EvalkitError` ends a command with one line and its exit code; SIGINT and
SIGTERM (`evalkit._util.interrupt`) with one line saying what finished and how to finish the rest, and
the exit code 128 + the signal number (130, 143)."""

from __future__ import annotations

import shlex
import signal
import sys
import threading

import click

from evalkit import __version__
from evalkit.errors import EvalkitError, UsageError

# Commands whose run folder a re-run completes (a check or band sweep starts over).
RESUMABLE = ("run", "score", "compare", "sweep")


def fail(err: EvalkitError) -> None:
    click.echo(f"evalkit: {err}", err=True)
    sys.exit(err.exit_code)


def _stopped(err: KeyboardInterrupt, args: list[str]) -> None:
    from evalkit._util.interrupt import Interrupted, received  # lazy: keeps `evalkit --help` fast
    from evalkit.backends.spec import redacted_command as quoted  # lazy: keeps `evalkit --help` fast

    sig = err.signum if isinstance(err, Interrupted) else received()
    done = err.done if isinstance(err, Interrupted) else ""
    click.echo(f"evalkit: stopped by {signal.Signals(sig).name}" + (f": {done}" if done else ""), err=True)
    command = next((a for a in args if a in main.commands), None)
    run_dir = getattr(err, "run_dir", None)
    if run_dir is not None and command in RESUMABLE:
        again = [a for a in args if not (command == "sweep" and a == "--force")]  # --force would redo the finished
        if command != "compare" and not any(a == "--out" or a.startswith("--out=") for a in again):
            again += ["--out", str(run_dir)]
        shown = quoted(again)  # redacted: a credential typed into a backend URL is not echoed
        click.echo(f"evalkit: to finish the rest: {shown}", err=True)
        if shown != shlex.join(["evalkit", *again]):
            click.echo("evalkit: (credentials in the command are hidden: type them in again)", err=True)
    sys.exit(128 + sig)


class _Group(click.Group):
    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        ctx.meta["evalkit.args"] = list(args)  # for the resume line of an interrupted run
        return super().parse_args(ctx, args)

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except EvalkitError as e:
            fail(e)
        except (FileExistsError, NotADirectoryError, IsADirectoryError) as e:  # a path naming the wrong thing
            fail(UsageError(f"{e.filename}: {e.strerror.lower()}: a file stands where a folder is needed, or the reverse"))
        except OSError as e:  # a write outside `jsonio` (a notebook, a lock) that found the disk full
            from evalkit._util.jsonio import DISK_ERRNOS, disk_full

            if e.errno not in DISK_ERRNOS:
                raise
            fail(disk_full(e))
        except KeyboardInterrupt as e:  # Ctrl-C or SIGTERM: the run has stopped its workers already
            _stopped(e, ctx.meta.get("evalkit.args", []))


@click.group(cls=_Group)
@click.version_option(__version__, prog_name="evalkit")
def main() -> None:
    """Measure how well an LLM extracts structured data from documents."""
    from evalkit.backends.cassette import env_cassette  # lazy: keeps `evalkit --help` fast

    env_cassette()  # EVALKIT_RECORD_LLM and EVALKIT_REPLAY_LLM both set: every command refuses at once (exit 2)
    if threading.current_thread() is threading.main_thread():
        from evalkit._util.interrupt import handle_signals  # lazy: keeps `evalkit --help` fast

        handle_signals()
