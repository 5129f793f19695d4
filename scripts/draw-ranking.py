#!/usr/bin/env python3
"""Recomputes a draw's ranking from a copy of the log, with nothing of the
platform's own code: only the rule as docs/EVENTS.md ("Draws", "The
ranking") writes it down, and Python's hashlib.

    seckill replay --voucher VOUCHER_ID --output draw.jsonl
    scripts/draw-ranking.py --voucher VOUCHER_ID draw.jsonl

Reads JSON Lines, one record per line as on the sales topic (what
`seckill replay` writes; other vouchers' and other types' lines are passed
by), takes each DrawEntered once per seq and each DrawRanked once per chunk
(the log is delivered at least once), and prints PASS when the commitment,
the list's hash and the logged ranking are what the rule gives, FAIL with
the first difference otherwise. Exit status 0 on PASS, 1 on FAIL, 2 when the
copy holds no revealed draw of that voucher.

A draw whose VoucherCreated plans a beacon round ("draw": {"beacon": …})
ranks by that drand round's randomness instead of a committed seed: then
the round must be the plan's, the first published after draw_at
(scripts/beacon_round.py, shared with scripts/room-order.py), its BLS signature
must verify under the plan's public key (checked by PyPI's drand-verify,
the League of Entropy scheme bls-unchained-g1-rfc9380, which must be
importable: scripts/setup --tests installs it into its own virtualenv),
and the revealed seed must be its randomness.

It exists to show that the written rule is enough to check a draw: the
platform's tests run it against the log of a real draw, and against a copy
with one entry changed.
"""

import argparse
import hashlib
import json
import sys

from beacon_round import round_problems


def sha1(text):
    return hashlib.sha1(text.encode("utf-8")).hexdigest()


def ranking(seed, entrants):
    """Steps 1 to 3: the list's hash, each entrant's key, ranks by key then id."""
    chain = ""
    for user in entrants:
        chain = sha1(chain + ":" + user)
    keyed = sorted((int(sha1(seed + ":" + chain + ":" + user)[:13], 16), user.encode("utf-8"), user)
                   for user in entrants)
    return chain, [user for _, _, user in keyed]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--voucher", required=True, help="the draw's voucher id")
    parser.add_argument("log", help="JSON Lines copy of the sales topic ('-' for standard input)")
    args = parser.parse_args()

    commitments, entries, reveal, chunks, definition = set(), {}, None, {}, None
    source = sys.stdin if args.log == "-" else open(args.log, encoding="utf-8")
    for line in source:
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if not isinstance(record, dict) or record.get("voucher_id") != args.voucher:
            continue
        kind = record.get("type")
        if kind == "VoucherCreated" and definition is None:
            definition = record
        elif kind == "DrawSeedCommitted":
            commitments.add(record["seed_hash"])
        elif kind == "DrawEntered":
            entries.setdefault(record["seq"], record["user_id"])
        elif kind == "DrawSeedRevealed" and reveal is None:
            reveal = record
        elif kind == "DrawRanked":
            chunks.setdefault(record["chunk"], record["users"])
    if reveal is None:
        print(f"no revealed draw of voucher {args.voucher} in {args.log}")
        return 2

    seed, count = reveal["seed"], reveal["entries"]
    entrants = [entries.get(seq) for seq in range(1, count + 1)]
    problems = []
    draw = (definition or {}).get("draw") or {}
    if draw.get("beacon"):
        problems.extend(round_problems(draw["beacon"], "entries closed", "draw_at", draw["draw_at"], reveal,
                                       "the draw ranks by a beacon round"))
    elif reveal.get("beacon"):
        problems.append("the reveal names a beacon round the VoucherCreated did not plan")
    elif hashlib.sha256(seed.encode("utf-8")).hexdigest() not in commitments:
        problems.append("SHA-256 of the revealed seed is not the committed hash")
    if None in entrants:
        problems.append(f"seq {entrants.index(None) + 1} is missing from the log")
        entrants = [user for user in entrants if user is not None]
    chain, recomputed = ranking(seed, entrants)
    if chain != reveal["entries_hash"]:
        problems.append(f"the list's hash is {chain or '(empty)'}, the reveal says {reveal['entries_hash'] or '(empty)'}")
    logged = [user for chunk in sorted(chunks) for user in chunks[chunk]]
    if logged != recomputed:
        first = next((rank for rank, pair in enumerate(zip(logged, recomputed), 1) if pair[0] != pair[1]),
                     min(len(logged), len(recomputed)) + 1)
        problems.append(f"the logged ranking differs from the recomputed one first at rank {first} "
                        f"({len(logged)} ranks logged, {len(recomputed)} recomputed)")
    print(f"draw of voucher {args.voucher}: {count} entries, list hash {chain or '(empty)'}, "
          f"{len(chunks)} ranking records")
    for problem in problems:
        print(f"  {problem}")
    print("FAIL" if problems else "PASS")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
