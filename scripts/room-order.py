#!/usr/bin/env python3
"""Recomputes a waiting room's order from a copy of the log, with nothing of
the platform's own code: only the rule as docs/EVENTS.md and core/src/
queue.rs write it down, Python's hashlib and, for a room shuffled by a beacon
round, PyPI's drand-verify.

    seckill replay --voucher VOUCHER_ID --output room.jsonl
    scripts/room-order.py --voucher VOUCHER_ID room.jsonl

Reads JSON Lines, one record per line as on the sales topic (what `seckill
replay` writes; other vouchers' and other types' lines are passed by; a
record delivered twice keeps its event id and counts once), and checks the
room's QueueSeedRevealed and every place passed (QueueEntryIssued,
QueuePlaceExpired):

- a room whose VoucherCreated plans a beacon round ("queue": {"beacon": …}):
  the planned round is the first of its chain published strictly after
  begins_at (when the pre-queue closed), the reveal logs that round, its BLS
  signature verifies under the plan's public key (drand-verify, the League
  of Entropy scheme bls-unchained-g1-rfc9380; scripts/setup --tests installs
  it into its own virtualenv), the revealed seed is its randomness, and the
  revealed pre-queue hash is the SHA-1 chain over the pre-queue's user ids
  in the byte order of "<user id>|1";
- a room without a plan: SHA-256 of the revealed seed was committed
  (QueueSeedCommitted); this trusts the operator, who chose the seed;
- either way: the reveal's pre_queued is the number of distinct users who
  joined before the start, and each place passed went to its holder: places
  1..P in the shuffle's order (keys are the first 13 hex digits of
  SHA-1("<key>:<user id>"), the key being "<randomness>:<pre-queue hash>"
  under a beacon, else the seed; equal keys by the bytes of "<user id>|1"),
  place P + n to the join after the start whose seq is n; no place twice.

Prints PASS, or FAIL with each problem. Exit status 0 on PASS, 1 on FAIL, 2
when the copy holds no revealed room of that voucher.
"""

import argparse
import hashlib
import json
import sys

from beacon_round import round_problems


def sha1(text):
    return hashlib.sha1(text.encode("utf-8")).hexdigest()


def pre_queue_hash(users):
    """Step 1 under a beacon: the users by the bytes of "<user id>|1", chained."""
    chain = ""
    for user in sorted(users, key=lambda user: (user + "|1").encode("utf-8")):
        chain = sha1(chain + ":" + user)
    return chain


def shuffle(key, users):
    """Places 1..P: by the first 13 hex digits of SHA-1("<key>:<user>"), then "<user>|1"."""
    keyed = sorted((int(sha1(key + ":" + user)[:13], 16), (user + "|1").encode("utf-8"), user) for user in users)
    return [user for _, _, user in keyed]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--voucher", required=True, help="the room's voucher id")
    parser.add_argument("log", help="JSON Lines copy of the sales topic ('-' for standard input)")
    args = parser.parse_args()

    definition, reveal, commitments, pre_queue, after_start, passes, seen = None, None, set(), set(), {}, [], set()
    source = sys.stdin if args.log == "-" else open(args.log, encoding="utf-8")
    for line in source:
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if not isinstance(record, dict) or record.get("voucher_id") != args.voucher:
            continue
        if record.get("event_id") in seen:
            continue
        seen.add(record.get("event_id"))
        kind = record.get("type")
        if kind == "VoucherCreated" and definition is None:
            definition = record
        elif kind == "QueueSeedCommitted":
            commitments.add(record["seed_hash"])
        elif kind == "QueueJoined" and record["pre_queue"]:
            pre_queue.add(record["user_id"])
        elif kind == "QueueJoined" and record.get("seq") is not None:
            after_start.setdefault(record["seq"], set()).add(record["user_id"])
        elif kind == "QueueSeedRevealed" and reveal is None:
            reveal = record
        elif kind in ("QueueEntryIssued", "QueuePlaceExpired"):
            passes.append((record["place"], record["user_id"]))
    if reveal is None:
        print(f"no revealed waiting room of voucher {args.voucher} in {args.log}")
        return 2

    problems, seed = [], reveal["seed"]
    plan = (((definition or {}).get("queue") or {}).get("beacon"))
    if plan:
        problems.extend(round_problems(plan, "the pre-queue closed", "begins_at", definition["begins_at"], reveal,
                                       "the room is shuffled by a beacon round"))
        recomputed = pre_queue_hash(pre_queue)
        if reveal.get("entries_hash") != recomputed:
            problems.append(f"the pre-queue's hash is {recomputed or '(empty)'}, "
                            f"the reveal says {reveal.get('entries_hash') or '(none)'}")
        order = shuffle(seed + ":" + recomputed, pre_queue)
    else:
        if reveal.get("beacon"):
            problems.append("the reveal names a beacon round the VoucherCreated did not plan")
        elif hashlib.sha256(seed.encode("utf-8")).hexdigest() not in commitments:
            problems.append("SHA-256 of the revealed seed is not a committed hash")
        order = shuffle(seed, pre_queue)
    count = reveal["pre_queued"]
    if count != len(order):
        problems.append(f"the reveal says {count} pre-queue places, the log holds {len(order)} pre-queue users")
    holders = {}
    for place, user in sorted(passes):
        if place in holders and holders[place] != user:
            problems.append(f"place {place} passed to both {holders[place]} and {user}")
        holders[place] = user
        if 1 <= place <= count:
            should = order[place - 1] if place <= len(order) else None
        else:
            users = after_start.get(place - count, set())
            should = next(iter(users)) if len(users) == 1 else None
        if user != should:
            problems.append(f"place {place} went to {user}, not {should or 'nobody'}")
    kind = f"beacon round {plan['round']}" if plan else "the operator's committed seed"
    print(f"waiting room of voucher {args.voucher}: shuffled by {kind}, {len(order)} pre-queue places, "
          f"{len(holders)} places passed")
    for problem in problems:
        print(f"  {problem}")
    print("FAIL" if problems else "PASS")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
