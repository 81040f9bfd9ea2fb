"""`evalkit validate`: lint a whole corpus, every problem at once.

Above both `evalkit.corpus` (loading tasks, members and truth strictly) and `evalkit.sources`
(the integrity gate on each member's source): a problem with either is a problem of the corpus,
except a pointer member's absent source, which `run` reports as skipped.
"""

from __future__ import annotations

from pathlib import Path

from .corpus import load_member, load_task, task_dirs
from .errors import CorpusError, IntegrityError, InvalidCorpus, SourceMissing
from .sources import check_integrity

__all__ = ["validate_corpus"]


def validate_corpus(corpus: Path, sources: Path | None = None) -> list[str]:
    """Lint every task and member; return every problem found (empty when clean)."""
    problems: list[str] = []
    try:
        dirs = task_dirs(corpus)
    except CorpusError as e:
        return [str(e)]
    if not dirs:
        return [f"{corpus}: no task folders (each needs a task.yaml)"]
    for tdir in dirs:
        try:
            task = load_task(tdir)
        except InvalidCorpus as e:
            problems.extend(e.problems)
            continue
        except CorpusError as e:
            problems.append(str(e))
            continue
        for mdir in task.member_dirs():
            try:
                member = load_member(task, mdir)
            except InvalidCorpus as e:
                problems.extend(e.problems)
                continue
            except CorpusError as e:
                problems.append(str(e))
                continue
            try:
                check_integrity(member, sources)
                if member.manifest.truth is not None:
                    member.load_truth(sources)
            except SourceMissing:
                pass  # reported by `run` as skipped; not a corpus error
            except IntegrityError as e:
                problems.append(str(e))
            except InvalidCorpus as e:
                problems.extend(e.problems)
            except CorpusError as e:  # a file that escapes the corpus or sources folder
                problems.append(str(e))
    return problems
