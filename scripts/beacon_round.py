"""The judgement of a sale's planned drand round against its reveal, shared
by scripts/draw-ranking.py and scripts/room-order.py (the platform's own is
analytics/src/beacon_plan.rs): the planned round is the first of its chain
published strictly after the sale's entries closed, the reveal logs that
round, its BLS signature verifies under the plan's public key (PyPI's
drand-verify, the League of Entropy scheme bls-unchained-g1-rfc9380,
imported only when a round is checked) and the revealed seed is its
randomness.
"""

import re
from datetime import datetime, timezone


def millis(stamp):
    """Unix milliseconds of an RFC 3339 time (any number of fraction digits)."""
    match = re.fullmatch(r"(.{19})(?:\.(\d+))?(Z|[+-]\d\d:\d\d)", stamp)
    if not match:
        raise ValueError(f"not an RFC 3339 time: {stamp}")
    whole, fraction, zone = match.groups()
    zone = "+00:00" if zone == "Z" else zone
    seconds = datetime.fromisoformat(whole + zone).astimezone(timezone.utc).timestamp()
    return int(seconds) * 1000 + int(((fraction or "") + "000")[:3])


def first_round_after(chain, at_ms):
    """The first round of `chain` published strictly after `at_ms`."""
    elapsed = at_ms - chain["genesis_time"] * 1000
    return 1 if elapsed < 0 else elapsed // (chain["period"] * 1000) + 2


def round_problems(plan, closed, closed_name, closed_at, reveal, what):
    """What is wrong with `plan` for entries that `closed` ("the pre-queue
    closed") at `closed_at`, the time field `closed_name` of the
    VoucherCreated, and with the round `reveal` logs; `what` says what the
    round decides, for the message when drand-verify is missing."""
    chain, logged, problems = plan["chain"], reveal.get("beacon"), []
    first = first_round_after(chain, millis(closed_at))
    round_time = chain["genesis_time"] + (plan["round"] - 1) * chain["period"]
    if plan["round"] != first:
        problems.append(f"the plan names round {plan['round']}, but the first round after {closed} "
                        f"({closed_name} {closed_at}) is {first}")
    if round_time * 1000 <= millis(closed_at):
        published = datetime.fromtimestamp(round_time, timezone.utc).isoformat()
        problems.append(f"round {plan['round']} is published at {published}, not after {closed_name} {closed_at}")
    if not logged:
        return problems + ["the reveal logs no beacon round"]
    if logged["round"] != plan["round"]:
        problems.append(f"the reveal logs round {logged['round']}, not the planned {plan['round']}")
    try:
        import drand_verify
    except ImportError:
        return problems + [f"{what}: checking it needs drand-verify (pip install drand-verify)"]
    try:
        randomness = drand_verify.verify_bls_unchained_g1_rfc9380(logged["round"], logged["signature"],
                                                                  chain["public_key"])
    except Exception as error:  # drand-verify raises on a signature that does not verify
        return problems + [f"the signature of round {logged['round']} does not verify: {error}"]
    if randomness != reveal["seed"]:
        problems.append(f"the revealed seed is not the randomness of round {logged['round']}")
    return problems
