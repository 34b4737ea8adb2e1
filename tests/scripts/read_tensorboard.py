#!/usr/bin/env python3
"""Prints the scalars of a TensorBoard log directory as TensorBoard reads them.

Usage: read_tensorboard.py LOGDIR

One line per value, `TAG<TAB>STEP<TAB>VALUE`, tags sorted, each tag's values
in the order TensorBoard keeps them (events of a resumed run that a
SessionLog START mark purges are gone). VALUE is Python's repr of the float
("nan", "inf" for non-finite ones). Reads with the `tensorboard` package's
EventAccumulator, the loader behind `tensorboard --logdir`; exits 77 (skip)
with a one-line reason when the package is absent.
"""
import sys


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    try:
        from tensorboard.backend.event_processing import event_accumulator
    except ImportError as e:
        print(f"SKIPPED: the tensorboard package is absent for {sys.executable} ({e}); "
              "scripts/deps.sh --with-python installs it", file=sys.stderr)
        return 77
    # SCALARS: 0 keeps every value (the default samples 10,000 per tag).
    acc = event_accumulator.EventAccumulator(
        sys.argv[1], size_guidance={event_accumulator.SCALARS: 0})
    acc.Reload()
    for tag in sorted(acc.Tags()[event_accumulator.SCALARS]):
        for ev in acc.Scalars(tag):
            print(f"{tag}\t{ev.step}\t{ev.value!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
