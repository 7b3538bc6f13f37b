"""Summarise mutmut's results: `mutmut results --all true` on stdin, optionally only the mutants named in a file.

Usage: mutmut results --all true | python scripts/mutation_summary.py [--only NAMES_FILE] [--sample-of TOTAL]
       mutmut results --all true | python scripts/mutation_summary.py --pick N --seed S   (prints N names at random)

The kill rate counts a timeout as killed (the mutant made the tests hang) and anything else that was checked and
not killed (survived, no tests reach it, suspicious) as a survivor. For a random sample it adds the 95 % Wilson
interval: where the kill rate of every configured mutant lies, judged from the sample.
"""

import argparse
import math
import random
import sys
from collections import Counter
from pathlib import Path

KILLED = {"killed", "timeout"}
NOT_RUN = {"not checked", "skipped", "check was interrupted by user"}


def read_results(lines) -> dict[str, str]:
    results = {}
    for line in lines:
        name, separator, status = line.strip().partition(": ")
        if separator:
            results[name] = status
    return results


def wilson(killed: int, checked: int, z: float = 1.96) -> tuple[float, float]:
    rate = killed / checked
    centre = (rate + z * z / (2 * checked)) / (1 + z * z / checked)
    spread = z * math.sqrt(rate * (1 - rate) / checked + z * z / (4 * checked * checked)) / (1 + z * z / checked)
    return centre - spread, centre + spread


def summarise(results: dict[str, str], sampled: bool) -> None:
    counts = Counter(results.values())
    print(", ".join(f"{status} {count}" for status, count in counts.most_common()))
    checked = sum(count for status, count in counts.items() if status not in NOT_RUN)
    killed = sum(counts[status] for status in KILLED)
    if not checked:
        print("no mutant checked yet")
        return
    line = f"kill rate: {killed} of {checked} checked = {killed / checked:.1%}"
    if sampled:
        low, high = wilson(killed, checked)
        line += f" (95 % interval for all the configured mutants: {low:.1%}-{high:.1%})"
    print(line)
    for name, status in sorted(results.items()):
        if status not in KILLED | NOT_RUN:
            print(f"  {status}: {name}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pick", type=int, help="print this many mutant names chosen at random, and nothing else")
    parser.add_argument("--seed", type=int, default=15)
    parser.add_argument("--only", help="a file of mutant names (one a line): summarise only those, as a sample")
    arguments = parser.parse_args()
    results = read_results(sys.stdin)
    if arguments.pick is not None:
        names = sorted(results)
        for name in random.Random(arguments.seed).sample(names, min(arguments.pick, len(names))):
            print(name)
        return
    if arguments.only:
        wanted = set(Path(arguments.only).read_text().split())
        results = {name: status for name, status in results.items() if name in wanted}
        print(f"a random sample of {len(results)} mutants:")
    summarise(results, sampled=bool(arguments.only))


if __name__ == "__main__":
    main()
