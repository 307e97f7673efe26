#!/usr/bin/env python3
"""Load a running ninfer-serve and report what its clients saw. Python 3 standard library only.

Three modes (docs/serving.md, "Soak and latency benchmark"):

  soak  N concurrent streaming clients for D seconds, each sending /v1/completions requests one
        after another with prompts of mixed lengths (token ids, so lengths are exact; some can
        be 16k+ tokens); with --turns T each prompt opens a conversation of up to T turns (a
        later turn: the last prompt, its reply and --turn-tokens new tokens: the prefix cache).
        Reports requests, failures, aggregate generated tok/s, p50/p99 time to first token and
        inter-token latency, what the cache gave the later turns, and GPU memory at start and
        end (nvidia-smi if present, else the server's /metrics).

  itl   The inter-token latency of --streams decoding streams alone, then while another
        request's long prompt is prefilled beside them, and each stream's ratio of the two
        (mixed steps should keep it within 1.5x).

  turns  A conversation's later turns against its cold first turn: time to first token of a
        --prompt-length-token first turn (cold), then, after two unrelated requests have taken
        every slot of a 2-slot server, of its second turn (the first turn's prompt, its reply and
        --turn-tokens new tokens: read from the prefix cache in another slot), then of its third
        turn (read from the slot that ran the second). docs/serving.md, "The prefix cache".

  decode  N streaming clients start together, one request each of --prompt-length tokens and
        --max-tokens tokens, for --rounds rounds: the aggregate decode tok/s while all N are
        decoding, and the inter-token latency (what ninfer-bench's decode rate at batch N is
        compared with: scripts/device.sh serve-bench).

    ninfer_soak.py --url http://127.0.0.1:8000 --clients 4 --duration 600 \\
        --prompt-lengths 128,1024,4096,16384 --max-tokens 256
    ninfer_soak.py --url http://127.0.0.1:8000 --mode itl --long-prompt 32000 --streams 2
    ninfer_soak.py --url http://127.0.0.1:8000 --mode decode --clients 8 --prompt-length 128 --max-tokens 512
    ninfer_soak.py --url http://127.0.0.1:8000 --mode turns --prompt-length 8000 --max-tokens 64

The exit status is 1 when any request failed, else 0. --json prints one JSON object (the
report) on stdout instead of text.
"""

import argparse
import http.client
import json
import random
import shutil
import subprocess
import sys
import threading
import time
import urllib.parse


def percentile(values, p):
    """The p-th percentile (0..100) by linear interpolation; None for no values."""
    if not values:
        return None
    s = sorted(values)
    k = (len(s) - 1) * p / 100.0
    lo = int(k)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


class Server:
    def __init__(self, url, api_key, timeout):
        u = urllib.parse.urlparse(url)
        if u.scheme != "http":
            raise SystemExit(f"--url {url}: only http:// is supported")
        self.host, self.port = u.hostname, u.port or 80
        self.prefix = u.path.rstrip("/")
        self.api_key = api_key
        self.timeout = timeout

    def headers(self):
        h = {"Content-Type": "application/json"}
        if self.api_key:
            h["Authorization"] = "Bearer " + self.api_key
        return h

    def get(self, path):
        c = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
        try:
            c.request("GET", self.prefix + path, headers=self.headers())
            r = c.getresponse()
            return r.status, r.read().decode("utf-8", "replace")
        finally:
            c.close()

    def model(self):
        status, body = self.get("/v1/models")
        if status != 200:
            raise SystemExit(f"GET /v1/models answered {status}: {body}")
        m = json.loads(body)["data"][0]
        return m["id"], int(m.get("max_model_len") or 0)

    def stream(self, body, on_token=None):
        """POSTs a streaming /v1/completions request; returns a dict of what the client saw:
        ok, error, sent, ttft (s), token times (s after sent), tokens."""
        out = {"ok": False, "error": None, "sent": time.monotonic(), "times": [], "tokens": 0, "ids": []}
        c = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
        try:
            c.request("POST", self.prefix + "/v1/completions", body=json.dumps(body), headers=self.headers())
            r = c.getresponse()
            if r.status != 200:
                out["error"] = f"HTTP {r.status}: {r.read()[:300].decode('utf-8', 'replace')}"
                return out
            done = False
            while True:
                line = r.readline()
                if not line:
                    break
                line = line.strip()
                if not line.startswith(b"data: "):
                    continue
                data = line[6:]
                if data == b"[DONE]":
                    done = True
                    break
                chunk = json.loads(data)
                if "error" in chunk:
                    out["error"] = "error event: " + json.dumps(chunk["error"])[:300]
                    return out
                for choice in chunk.get("choices", []):
                    n = len(choice.get("token_ids") or [])
                    out["ids"].extend(choice.get("token_ids") or [])
                    if n:
                        now = time.monotonic() - out["sent"]
                        out["times"].extend([now] * n)
                        out["tokens"] += n
                        if on_token:
                            on_token(out["tokens"])
                if chunk.get("usage"):
                    out["usage"] = chunk["usage"]
            if not done:
                out["error"] = "the stream ended without data: [DONE]"
                return out
            out["ok"] = True
            return out
        except Exception as e:  # a dropped connection, a timeout, bad JSON: all failures
            out["error"] = f"{type(e).__name__}: {e}"
            return out
        finally:
            c.close()


def gpu_memory(server):
    """GPU memory in use: per GPU from nvidia-smi (MiB), else the server's /metrics gauges."""
    if shutil.which("nvidia-smi"):
        try:
            text = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                                  capture_output=True, text=True, timeout=30, check=True).stdout
            return {"source": "nvidia-smi", "used_mib": [int(x) for x in text.split()]}
        except (subprocess.SubprocessError, ValueError) as e:
            print(f"nvidia-smi failed ({e}); using /metrics", file=sys.stderr)
    try:
        status, body = server.get("/metrics")
    except OSError as e:
        return {"source": "none", "error": str(e)}
    gauges = {}
    for line in body.splitlines():
        name, _, value = line.partition(" ")
        if name in ("ninfer_kv_cache_bytes", "ninfer_state_bytes", "ninfer_slots_in_use", "ninfer_queue_depth"):
            gauges[name] = float(value)
    return {"source": "metrics", **gauges}


def prompt_ids(rng, n, lo, hi):
    return [rng.randrange(lo, hi) for _ in range(n)]


def request_body(model, ids, max_tokens):
    # ignore_eos: every request generates max_tokens, so the load is what was asked for;
    # return_token_ids: one event per token, so inter-token latency is per token.
    return {"model": model, "prompt": ids, "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True,
            "stream": True, "stream_options": {"include_usage": True}, "return_token_ids": True}


def soak(args, server, model, max_len):
    lengths = [int(x) for x in args.prompt_lengths.split(",")]
    fitting = [n for n in lengths if not max_len or n + args.max_tokens <= max_len]
    for n in sorted(set(lengths) - set(fitting)):
        print(f"prompt length {n} + {args.max_tokens} exceeds the context ({max_len}); skipped", file=sys.stderr)
    if not fitting:
        raise SystemExit("no --prompt-lengths fit the server's context")
    mem_start = gpu_memory(server)
    results, lock = [], threading.Lock()
    t0 = time.monotonic()
    deadline = t0 + args.duration

    def client(k):
        rng = random.Random(args.seed * 1000 + k)
        i = 0
        conversation, turn = None, 0  # the last turn's prompt and reply, and its turn number
        while time.monotonic() < deadline:
            follow_up = None
            if conversation is not None and turn < args.turns:
                follow_up = conversation + prompt_ids(rng, args.turn_tokens, args.id_min, args.id_max)
                if max_len and len(follow_up) + args.max_tokens > max_len:
                    follow_up = None  # the conversation is full: a new one starts
            if follow_up is None:
                n = fitting[(k + i) % len(fitting)]
                i += 1
                ids, turn = prompt_ids(rng, n, args.id_min, args.id_max), 1
            else:
                ids, turn = follow_up, turn + 1
            r = server.stream(request_body(model, ids, args.max_tokens))
            r["prompt_tokens"], r["turn"] = len(ids), turn
            r["cached_tokens"] = ((r.get("usage") or {}).get("prompt_tokens_details") or {}).get("cached_tokens", 0)
            conversation = ids + r["ids"] if r["ok"] else None
            with lock:
                results.append(r)
            if not r["ok"] and not args.quiet:
                print(f"client {k}: request failed: {r['error']}", file=sys.stderr)

    threads = [threading.Thread(target=client, args=(k,)) for k in range(args.clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - t0
    mem_end = gpu_memory(server)

    ok = [r for r in results if r["ok"]]
    ttft = [r["times"][0] for r in ok if r["times"]]
    itl = [b - a for r in ok for a, b in zip(r["times"], r["times"][1:])]
    tokens = sum(r["tokens"] for r in results)
    by_length = {}
    for n in fitting:
        rs = [r for r in ok if r["turn"] == 1 and r["prompt_tokens"] == n and r["times"]]
        by_length[str(n)] = {"requests": len(rs), "ttft_p50_s": percentile([r["times"][0] for r in rs], 50)}
    # Later turns extend a prompt the server has seen: what its prefix cache gave them.
    later = [r for r in ok if r["turn"] > 1]
    later_prompt = sum(r["prompt_tokens"] for r in later)
    conv = {"turns": args.turns, "turn_tokens": args.turn_tokens, "later_turns": len(later),
             "later_prompt_tokens": later_prompt, "later_cached_tokens": sum(r["cached_tokens"] for r in later),
             "later_ttft_p50_s": percentile([r["times"][0] for r in later if r["times"]], 50),
             "later_with_cache_hit": sum(1 for r in later if r["cached_tokens"] > 0)}
    conv["later_cached_share"] = conv["later_cached_tokens"] / later_prompt if later_prompt else None
    return {
        "mode": "soak", "model": model, "clients": args.clients, "duration_s": round(wall, 3),
        "prompt_lengths": fitting, "max_tokens": args.max_tokens,
        "requests": len(results), "failures": len(results) - len(ok),
        "errors": sorted({r["error"] for r in results if r["error"]})[:10],
        "generated_tokens": tokens, "tok_s": tokens / wall if wall > 0 else 0.0,
        "ttft_s": {"p50": percentile(ttft, 50), "p99": percentile(ttft, 99), "max": max(ttft, default=None)},
        "itl_s": {"p50": percentile(itl, 50), "p99": percentile(itl, 99), "max": max(itl, default=None)},
        "ttft_by_prompt_length": by_length, "conversations": conv,
        "gpu_memory_start": mem_start, "gpu_memory_end": mem_end,
        "gpu_memory_growth_mib": memory_growth(mem_start, mem_end),
    }


def memory_growth(start, end):
    """nvidia-smi: MiB gained per GPU from start to end (should be 0 after warm-up)."""
    if start.get("source") == "nvidia-smi" and end.get("source") == "nvidia-smi":
        return [b - a for a, b in zip(start["used_mib"], end["used_mib"])]
    return None


def itl_stats(times_per_stream):
    """Inter-token gaps pooled over streams (each a list of token times on its own clock)."""
    gaps = [b - a for times in times_per_stream for a, b in zip(times, times[1:])]
    return {"tokens": sum(len(t) for t in times_per_stream), "p50_s": percentile(gaps, 50),
            "p99_s": percentile(gaps, 99), "max_s": max(gaps, default=None)}


def ratio(a, b):
    return a / b if a is not None and b else None


def run_streams(server, bodies, on_decoding=None):
    """The streams at once; on_decoding() once every one has 4 tokens. Their results, in order."""
    results = [None] * len(bodies)
    counts = [0] * len(bodies)
    lock = threading.Lock()
    fired = [False]

    def seen(k, n):
        with lock:
            counts[k] = n
            if on_decoding and not fired[0] and min(counts) >= 4:
                fired[0] = True
                on_decoding()

    def client(k):
        results[k] = server.stream(bodies[k], on_token=lambda n: seen(k, n))

    threads = [threading.Thread(target=client, args=(k,)) for k in range(len(bodies))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def itl(args, server, model, max_len):
    if max_len and args.long_prompt + 1 > max_len:
        raise SystemExit(f"--long-prompt {args.long_prompt} does not fit the context ({max_len})")
    rng = random.Random(args.seed)
    bodies = [request_body(model, prompt_ids(rng, 16, args.id_min, args.id_max), args.stream_tokens)
              for _ in range(args.streams)]
    alone = run_streams(server, bodies)
    failed = [r for r in alone if not r["ok"]]
    if failed:
        raise SystemExit(f"a decoding stream failed: {failed[0]['error']}")

    # Again, and once every stream is decoding, another client sends the long prompt.
    started = threading.Event()
    box = {}

    def decoding():
        box["streams"] = run_streams(server, bodies, on_decoding=started.set)
        started.set()

    t = threading.Thread(target=decoding)
    t.start()
    started.wait()
    long_body = request_body(model, prompt_ids(rng, args.long_prompt, args.id_min, args.id_max), 1)
    long_req = server.stream(long_body)
    t.join()
    streams = box["streams"]
    failures = sum(int(not r["ok"]) for r in streams) + int(not long_req["ok"])
    # The long prompt's prefill on each stream's clock: sent .. its first token.
    during = []
    for s in streams:
        start = long_req["sent"] - s["sent"]
        end = start + (long_req["times"][0] if long_req["times"] else 0.0)
        during.append([x for x in s["times"] if start <= x <= end])
    per_stream = []
    for a, d in zip(alone, during):
        sa, sd = itl_stats([a["times"]]), itl_stats([d])
        per_stream.append({"alone_p50_s": sa["p50_s"], "during_p50_s": sd["p50_s"], "during_p99_s": sd["p99_s"],
                           "ratio_p50": ratio(sd["p50_s"], sa["p50_s"]), "ratio_p99": ratio(sd["p99_s"], sa["p50_s"])})
    ratios = [p["ratio_p50"] for p in per_stream if p["ratio_p50"] is not None]
    ratios99 = [p["ratio_p99"] for p in per_stream if p["ratio_p99"] is not None]
    return {
        "mode": "itl", "model": model, "streams": args.streams, "stream_tokens": args.stream_tokens,
        "long_prompt": args.long_prompt,
        "failures": failures, "errors": [e for e in [s["error"] for s in streams] + [long_req["error"]] if e],
        "alone": itl_stats([a["times"] for a in alone]),
        "with_prefill": itl_stats([s["times"] for s in streams]),
        "during_prefill": itl_stats(during),
        "long_prompt_ttft_s": long_req["times"][0] if long_req["times"] else None,
        "stream_tokens_during_prefill": sum(len(d) for d in during),
        "per_stream": per_stream,
        # Each stream's inter-token latency during the prefill over its own alone (p50 / p50,
        # p99 / p50), the worst stream's: the issue-33 target is ratio_p50 <= 1.5.
        "itl_ratio_p50": max(ratios, default=None),
        "itl_ratio_p99": max(ratios99, default=None),
    }


def decode_round(server, bodies):
    """One round of the decode mode: every client sends its request at the same moment."""
    barrier = threading.Barrier(len(bodies))
    results = [None] * len(bodies)

    def client(k):
        barrier.wait()
        results[k] = server.stream(bodies[k])

    threads = [threading.Thread(target=client, args=(k,)) for k in range(len(bodies))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    failures = [r for r in results if not r["ok"] or not r["times"]]
    if failures:
        return {"failures": len(failures), "errors": sorted({r["error"] or "no tokens" for r in failures})}
    # Token arrival moments on one clock. The window in which every client is decoding: from
    # the last client's first token to the first client's last token. Tokens arriving inside it
    # over its length is the aggregate decode rate of N concurrent streams.
    arrivals = [[r["sent"] + t for t in r["times"]] for r in results]
    start = max(a[0] for a in arrivals)
    end = min(a[-1] for a in arrivals)
    tokens = sum(sum(1 for t in a if start < t <= end) for a in arrivals)
    gaps = [b - a for times in arrivals for a, b in zip(times, times[1:]) if start <= a and b <= end]
    per_client = [percentile([b - a for a, b in zip(times, times[1:])], 50) for times in arrivals]
    return {
        "failures": 0, "errors": [], "window_s": end - start, "window_tokens": tokens,
        "decode_tok_s": tokens / (end - start) if end > start else None,
        "itl_s": {"p50": percentile(gaps, 50), "p99": percentile(gaps, 99), "max": max(gaps, default=None)},
        "client_itl_p50_s": per_client,
        "ttft_s": [a[0] - r["sent"] for a, r in zip(arrivals, results)],
    }


def decode(args, server, model, max_len):
    if max_len and args.prompt_length + args.max_tokens > max_len:
        raise SystemExit(f"--prompt-length {args.prompt_length} plus --max-tokens {args.max_tokens} does not fit "
                         f"the context ({max_len})")
    rng = random.Random(args.seed)
    rounds = []
    for _ in range(args.rounds):
        bodies = [request_body(model, prompt_ids(rng, args.prompt_length, args.id_min, args.id_max), args.max_tokens)
                  for _ in range(args.clients)]
        rounds.append(decode_round(server, bodies))
    ok = [r for r in rounds if not r["failures"] and r["decode_tok_s"]]
    rates = [r["decode_tok_s"] for r in ok]
    return {
        "mode": "decode", "model": model, "clients": args.clients, "prompt_length": args.prompt_length,
        "max_tokens": args.max_tokens, "rounds": rounds,
        "failures": sum(r["failures"] for r in rounds),
        "errors": sorted({e for r in rounds for e in r["errors"]})[:10],
        # The streams' mean context while decoding: what ninfer-bench's --contexts is set to.
        "mean_context": args.prompt_length + args.max_tokens // 2,
        "decode_tok_s": {"median": percentile(rates, 50), "min": min(rates, default=None),
                         "max": max(rates, default=None)},
        "itl_p50_s": percentile([r["itl_s"]["p50"] for r in ok], 50),
        "itl_p99_s": percentile([r["itl_s"]["p99"] for r in ok], 50),
    }


def turns(args, server, model, max_len):
    rng = random.Random(args.seed)
    new = lambda n: prompt_ids(rng, n, args.id_min, args.id_max)
    rep = {"mode": "turns", "model": model, "prompt_length": args.prompt_length, "turn_tokens": args.turn_tokens,
           "max_tokens": args.max_tokens, "failures": 0, "errors": [], "steps": []}

    def ask(what, ids):
        r = server.stream(request_body(model, ids, args.max_tokens))
        usage = r.get("usage") or {}
        cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens", 0)
        rep["steps"].append({"what": what, "prompt_tokens": len(ids), "ttft_s": r["times"][0] if r["times"] else None,
                             "cached_tokens": cached, "ok": r["ok"]})
        if not r["ok"]:
            rep["failures"] += 1
            rep["errors"].append(f"{what}: {r['error']}")
        return r["ids"]

    final = args.prompt_length + 2 * (args.max_tokens + args.turn_tokens)
    if max_len and final + args.max_tokens > max_len:
        raise SystemExit(f"three turns reach {final + args.max_tokens} tokens, past the context ({max_len})")
    ask("warm-up", new(args.prompt_length))
    turn1 = new(args.prompt_length)
    reply1 = ask("turn 1 (cold)", turn1)
    for k in range(2):  # two unrelated requests: the slot that ran turn 1 holds other tokens after them
        ask(f"other {k + 1} (cold)", new(args.prompt_length))
    turn2 = turn1 + reply1 + new(args.turn_tokens)
    reply2 = ask("turn 2 (another slot: the prefix cache)", turn2)
    ask("turn 3 (the same slot)", turn2 + reply2 + new(args.turn_tokens))
    cold = [s["ttft_s"] for s in rep["steps"] if "(cold)" in s["what"] and s["ttft_s"]]
    rep["cold_ttft_s"] = percentile(cold, 50)
    for s in rep["steps"]:
        s["speedup"] = rep["cold_ttft_s"] / s["ttft_s"] if s["ttft_s"] and rep["cold_ttft_s"] else None
    return rep


def fmt_s(x):
    return "-" if x is None else f"{x * 1000:.1f} ms"


def print_report(rep):
    if rep["mode"] == "soak":
        print(f"{rep['model']}: {rep['clients']} clients for {rep['duration_s']:.1f} s, prompts {rep['prompt_lengths']}, "
              f"{rep['max_tokens']} tokens each")
        print(f"requests {rep['requests']}, failures {rep['failures']}, {rep['generated_tokens']} tokens, "
              f"{rep['tok_s']:.1f} tok/s")
        print(f"TTFT p50 {fmt_s(rep['ttft_s']['p50'])}, p99 {fmt_s(rep['ttft_s']['p99'])}; "
              f"ITL p50 {fmt_s(rep['itl_s']['p50'])}, p99 {fmt_s(rep['itl_s']['p99'])}")
        c = rep["conversations"]
        if c["turns"] > 1:
            share = "-" if c["later_cached_share"] is None else f"{100 * c['later_cached_share']:.1f}%"
            print(f"later turns {c['later_turns']} ({c['later_with_cache_hit']} read from the cache): "
                  f"{c['later_cached_tokens']} of {c['later_prompt_tokens']} prompt tokens cached ({share}), "
                  f"TTFT p50 {fmt_s(c['later_ttft_p50_s'])}")
        print(f"GPU memory start {json.dumps(rep['gpu_memory_start'])}, end {json.dumps(rep['gpu_memory_end'])}, "
              f"growth {rep['gpu_memory_growth_mib']} MiB")
    elif rep["mode"] == "turns":
        print(f"{rep['model']}: a conversation of {rep['prompt_length']} prompt tokens, {rep['turn_tokens']} new "
              f"tokens a turn, {rep['max_tokens']} generated a turn; time to first token:")
        for s in rep["steps"]:
            sp = "" if s["speedup"] is None else f", {s['speedup']:.1f}x sooner than cold"
            print(f"  {s['what']:42s} {s['prompt_tokens']:6d} tokens, {s['cached_tokens']:6d} cached: "
                  f"TTFT {fmt_s(s['ttft_s'])}{sp}")
    elif rep["mode"] == "decode":
        print(f"{rep['model']}: {rep['clients']} streaming clients, prompts of {rep['prompt_length']} tokens, "
              f"{rep['max_tokens']} tokens each, {len(rep['rounds'])} rounds")
        for i, r in enumerate(rep["rounds"]):
            if r["failures"]:
                print(f"round {i}: {r['failures']} failures")
                continue
            print(f"round {i}: {r['decode_tok_s']:.1f} tok/s over {r['window_s']:.2f} s with all decoding; "
                  f"ITL p50 {fmt_s(r['itl_s']['p50'])}, p99 {fmt_s(r['itl_s']['p99'])}; per client p50 "
                  + " ".join(fmt_s(x) for x in r["client_itl_p50_s"]))
        d = rep["decode_tok_s"]
        if d["median"] is not None:
            print(f"aggregate decode {d['median']:.1f} tok/s (median; {d['min']:.1f}-{d['max']:.1f}), ITL p50 "
                  f"{fmt_s(rep['itl_p50_s'])}, p99 {fmt_s(rep['itl_p99_s'])}; mean context {rep['mean_context']}")
    else:
        for k in ("alone", "with_prefill", "during_prefill"):
            v = rep[k]
            print(f"{k:15s} {v['tokens']:5d} tokens, ITL p50 {fmt_s(v['p50_s'])}, p99 {fmt_s(v['p99_s'])}, "
                  f"max {fmt_s(v['max_s'])}")
        print(f"long prompt of {rep['long_prompt']} tokens: first token after {fmt_s(rep['long_prompt_ttft_s'])}; "
              f"{rep['stream_tokens_during_prefill']} stream tokens meanwhile ({rep['streams']} streams)")
        for k, p in enumerate(rep["per_stream"]):
            r50 = "-" if p["ratio_p50"] is None else f"{p['ratio_p50']:.2f}x"
            r99 = "-" if p["ratio_p99"] is None else f"{p['ratio_p99']:.2f}x"
            print(f"stream {k}: ITL p50 alone {fmt_s(p['alone_p50_s'])}, during the prefill {fmt_s(p['during_p50_s'])} "
                  f"(p99 {fmt_s(p['during_p99_s'])}): {r50} (p99 {r99})")
        if rep["itl_ratio_p50"] is not None:
            print(f"ITL during the prefill over alone, worst stream: p50 {rep['itl_ratio_p50']:.2f}x, p99 "
                  f"{rep['itl_ratio_p99']:.2f}x (target p50 <= 1.5x: {'met' if rep['itl_ratio_p50'] <= 1.5 else 'missed'})")
    for e in rep["errors"]:
        print("error:", e)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", default="http://127.0.0.1:8000", help="the server (default %(default)s)")
    p.add_argument("--api-key", default=None, help="sent as Authorization: Bearer KEY")
    p.add_argument("--mode", choices=["soak", "itl", "decode", "turns"], default="soak")
    p.add_argument("--clients", type=int, default=4, help="soak, decode: concurrent clients (default %(default)s)")
    p.add_argument("--duration", type=float, default=60, help="soak: seconds (default %(default)s)")
    p.add_argument("--prompt-lengths", default="128,1024,4096,16384",
                   help="soak: prompt lengths in tokens, used in turn by each client (default %(default)s)")
    p.add_argument("--max-tokens", type=int, default=128,
                   help="soak, decode: tokens generated per request (default %(default)s)")
    p.add_argument("--prompt-length", type=int, default=128,
                   help="decode: prompt tokens; turns: the first turn's (default %(default)s)")
    p.add_argument("--turn-tokens", type=int, default=100,
                   help="turns, soak: new tokens of each later turn's message (default %(default)s)")
    p.add_argument("--turns", type=int, default=1,
                   help="soak: turns per conversation; a later turn sends the last turn's prompt, its reply and "
                        "--turn-tokens new tokens, while they fit the context (default %(default)s: single requests)")
    p.add_argument("--rounds", type=int, default=3, help="decode: rounds of N requests (default %(default)s)")
    p.add_argument("--long-prompt", type=int, default=16384, help="itl: the long prompt's tokens (default %(default)s)")
    p.add_argument("--stream-tokens", type=int, default=256, help="itl: each decoding stream's tokens (default %(default)s)")
    p.add_argument("--streams", type=int, default=1,
                   help="itl: decoding streams beside the long prompt (default %(default)s)")
    p.add_argument("--id-min", type=int, default=1000, help="prompt token ids are drawn from [id-min, id-max)")
    p.add_argument("--id-max", type=int, default=30000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--timeout", type=float, default=600, help="seconds one request may take (default %(default)s)")
    p.add_argument("--json", action="store_true", help="print the report as one JSON object")
    p.add_argument("--quiet", action="store_true", help="do not print each failure as it happens")
    args = p.parse_args()
    if args.turns < 1:
        p.error("--turns must be at least 1")

    server = Server(args.url, args.api_key, args.timeout)
    model, max_len = server.model()
    rep = {"soak": soak, "itl": itl, "decode": decode, "turns": turns}[args.mode](args, server, model, max_len)
    if args.json:
        print(json.dumps(rep))
    else:
        print_report(rep)
    return 1 if rep["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
