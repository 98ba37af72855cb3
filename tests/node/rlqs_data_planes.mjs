// Simulated Envoy data planes against tollgated's Rate Limit Quota Service, with
// @grpc/grpc-js and the repository's rlqs.proto loaded by @grpc/proto-loader (no generated
// code). Started by tests/server/rlqs_node_test.cc, which starts tollgated (and redis-server)
// and passes one JSON argument:
//   {"proto_root": ".../proto", "domain": "edge", "bucket": {"name": "api", "user": "alice"},
//    "rate": 100, "burst": 100,          // the rule every plane's bucket matches: tokens/s, burst
//    "report_ms": 1000,                  // each plane's reporting_interval
//    "warmup_ms": 4000, "measure_ms": 5000,
//    "planes": [{"name": "light", "demand": 10, "target": "127.0.0.1:PORT"}, ...],
//    "check_shares": true,               // assert the split by demand (one tollgated only)
//    "admins": ["127.0.0.1:PORT", ...]}  // tollgated admin listeners, for /metrics
//
// Each plane is one StreamRateLimitQuotas stream and enforces its assignment as Envoy's
// rate_limit_quota filter does: a token_bucket assignment is a bucket that starts full at
// max_tokens and refills tokens_per_fill per fill_interval continuously (Envoy's
// AtomicTokenBucketImpl); an assignment equal to the active one extends it (the bucket keeps its
// tokens), a different one replaces it (full again); blanket rules allow or deny all; before the
// first assignment the plane denies (no_assignment_behavior DENY_ALL). The first request of the
// bucket sends an immediate report (the "watch"), then one every report_ms.
//
// Asserts (exit 1 with the reason; the summary is printed as the last line either way):
//  - every plane's first report is answered before its first reporting interval ends;
//  - the store's bound: what all instances assigned in total (tollgate_rlqs_assigned_tokens_total)
//    never exceeds the rule's burst plus its rate over the run;
//  - what all planes admitted in total stays within that limit plus one assignment's tokens
//    per stream, plus one more for every assignment that replaced a plane's bucket (a replaced
//    bucket starts full: docs/envoy.md, "Not implemented (yet)");
//  - with check_shares (the planes of one tollgated, whose split is max-min fair by demand):
//    shares follow demand: in the last rounds, a heavier plane is assigned more than a light
//    one, and the lightest plane's demand is met (it denies almost nothing).
import assert from 'node:assert/strict';
import http from 'node:http';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import grpc from '@grpc/grpc-js';
import protoLoader from '@grpc/proto-loader';

const config = JSON.parse(process.argv[2] ?? '{}');
const TICK_MS = 10;

function loadService(protoRoot) {
  const definition = protoLoader.loadSync(
      path.join(protoRoot, 'envoy/service/rate_limit_quota/v3/rlqs.proto'), {
        includeDirs: [protoRoot],
        keepCase: true,
        longs: Number,
        enums: String,
        defaults: false,
        oneofs: true,
      });
  return grpc.loadPackageDefinition(definition)
      .envoy.service.rate_limit_quota.v3.RateLimitQuotaService;
}

const durationMs = (d) => (d ? Number(d.seconds ?? 0) * 1000 + Number(d.nanos ?? 0) / 1e6 : 0);
const toDuration = (ms) => ({
  seconds: Math.floor(ms / 1000),
  nanos: Math.round((ms % 1000) * 1e6),
});

// A Prometheus counter summed over every sample of `family` at `admin`.
function metricSum(admin, family) {
  return new Promise((resolve, reject) => {
    const req = http.get(`http://${admin}/metrics`, { timeout: 10000 }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk) => { body += chunk; });
      res.on('end', () => {
        let sum = 0;
        for (const line of body.split('\n')) {
          if (line.startsWith(family + '{') || line.startsWith(family + ' ')) {
            sum += Number(line.slice(line.lastIndexOf(' ') + 1));
          }
        }
        resolve(sum);
      });
    });
    req.on('timeout', () => req.destroy(new Error(`GET ${admin}/metrics timed out`)));
    req.on('error', reject);
  });
}

class DataPlane {
  constructor(Service, spec, startMs) {
    this.name = spec.name;
    this.demand = spec.demand;  // requests per second offered
    this.client = new Service(spec.target, grpc.credentials.createInsecure());
    this.startMs = startMs;
    this.generated = 0;
    this.admitted = 0;
    this.deniedTotal = 0;
    this.allowed = 0;  // since the last report
    this.denied = 0;
    this.active = null;  // the active strategy's JSON
    this.kind = 'none';  // none | allow | deny | bucket
    this.tokens = 0;
    this.maxTokens = 0;
    this.fillPerMs = 0;
    this.lastRefillMs = 0;
    this.firstReportMs = null;
    this.firstAnswerMs = null;
    this.answeredInTime = null;  // set when the first interval ends
    this.lastReportMs = null;
    this.assignments = [];  // {t, per_second, max_tokens} per received token bucket or blanket rule
    this.replacements = [];  // max_tokens of every assignment that replaced the plane's bucket
    this.maxAssigned = 0;
    this.streamError = null;
  }

  open() {
    this.stream = this.client.StreamRateLimitQuotas();
    this.stream.on('data', (resp) => this.apply(resp));
    this.stream.on('error', (err) => {
      if (!this.closing) this.streamError = `${err.code}: ${err.details}`;
    });
  }

  apply(resp) {
    const now = performance.now();
    if (this.firstAnswerMs === null) this.firstAnswerMs = now;
    for (const action of resp.bucket_action ?? []) {
      const strategy = action.quota_assignment_action?.rate_limit_strategy;
      if (!strategy) continue;  // abandon_action: tollgate sends none (see docs/envoy.md)
      const json = JSON.stringify(strategy);
      let perSecond = -1;
      if (strategy.token_bucket) {
        const tb = strategy.token_bucket;
        const perFill = Number(tb.tokens_per_fill?.value ?? 1);
        perSecond = perFill * 1000 / durationMs(tb.fill_interval);
        this.maxAssigned = Math.max(this.maxAssigned, Number(tb.max_tokens));
      } else if (strategy.blanket_rule === 'DENY_ALL') {
        perSecond = 0;
      }
      this.assignments.push({ t: Math.round(now - this.startMs), per_second: perSecond });
      if (json === this.active) continue;  // the same assignment: extended
      this.active = json;
      if (strategy.token_bucket) {
        const tb = strategy.token_bucket;
        this.kind = 'bucket';
        this.maxTokens = Number(tb.max_tokens);
        this.tokens = this.maxTokens;
        this.fillPerMs = Number(tb.tokens_per_fill?.value ?? 1) / durationMs(tb.fill_interval);
        this.lastRefillMs = now;
        this.replacements.push(this.maxTokens);
      } else {
        this.kind = strategy.blanket_rule === 'ALLOW_ALL' ? 'allow' : 'deny';
      }
    }
  }

  admit(now) {
    if (this.kind === 'allow') return true;
    if (this.kind !== 'bucket') return false;
    this.tokens = Math.min(this.maxTokens, this.tokens + (now - this.lastRefillMs) * this.fillPerMs);
    this.lastRefillMs = now;
    if (this.tokens < 1) return false;
    this.tokens -= 1;
    return true;
  }

  // Offers the requests due by `now` (demand per second since the start).
  traffic(now, measuring) {
    const due = Math.floor(this.demand * (now - this.startMs) / 1000);
    while (this.generated < due) {
      ++this.generated;
      if (this.firstReportMs === null) this.report(now, true);  // the bucket's first request
      if (this.admit(now)) {
        ++this.allowed;
        ++this.admitted;
        if (measuring) ++measuring.admitted;
      } else {
        ++this.denied;
        ++this.deniedTotal;
        if (measuring) ++measuring.denied[this.name];
      }
    }
  }

  report(now, first) {
    const usage = {
      bucket_id: { bucket: config.bucket },
      time_elapsed: toDuration(first ? 0 : now - this.lastReportMs),
      num_requests_allowed: this.allowed,
      num_requests_denied: this.denied,
    };
    this.allowed = this.denied = 0;
    this.lastReportMs = now;
    if (first) {
      this.firstReportMs = now;
      this.timer = setInterval(() => {
        const t = performance.now();
        if (this.answeredInTime === null) this.answeredInTime = this.firstAnswerMs !== null;
        this.report(t, false);
      }, config.report_ms);
    }
    this.stream.write({ domain: config.domain, bucket_quota_usages: { 1: usage } });
  }

  close() {
    this.closing = true;
    clearInterval(this.timer);
    this.stream.end();
    this.client.close();
  }
}

async function main() {
  const Service = loadService(config.proto_root);
  const start = performance.now();
  const planes = config.planes.map((spec) => new DataPlane(Service, spec, start));
  for (const p of planes) p.open();
  const measuring = { admitted: 0, denied: Object.fromEntries(planes.map((p) => [p.name, 0])) };
  let window = null;
  const end = start + config.warmup_ms + config.measure_ms;
  await new Promise((resolve) => {
    const tick = setInterval(() => {
      const now = performance.now();
      if (window === null && now >= start + config.warmup_ms) window = { from: now };
      for (const p of planes) p.traffic(now, window ? measuring : null);
      if (now >= end) {
        clearInterval(tick);
        resolve();
      }
    }, TICK_MS);
  });
  const elapsedMs = performance.now() - start;
  window.to = performance.now();
  for (const p of planes) p.close();
  let assigned = 0;
  for (const admin of config.admins) {
    assigned += await metricSum(admin, 'tollgate_rlqs_assigned_tokens_total');
  }

  const admitted = planes.reduce((s, p) => s + p.admitted, 0);
  const storeLimit = config.burst + config.rate * elapsedMs / 1000;
  const oneAssignmentPerStream = planes.reduce((s, p) => s + p.maxAssigned, 0);
  const replaced = planes.reduce((s, p) => s + p.replacements.reduce((a, b) => a + b, 0), 0);
  // The last three assignments of each plane, per second.
  const lastShare = (p) => {
    const tail = p.assignments.slice(-3).map((a) => a.per_second);
    return tail.reduce((a, b) => a + b, 0) / Math.max(1, tail.length);
  };
  const summary = {
    elapsed_ms: Math.round(elapsedMs),
    admitted,
    assigned,
    store_limit: Math.floor(storeLimit),
    one_assignment_per_stream: oneAssignmentPerStream,
    replaced_tokens: replaced,
    window_ms: Math.round(window.to - window.from),
    window_admitted: measuring.admitted,
    planes: planes.map((p) => ({
      name: p.name,
      demand: p.demand,
      admitted: p.admitted,
      denied: p.deniedTotal,
      window_denied: measuring.denied[p.name],
      first_answer_ms: p.firstAnswerMs === null ? null : Math.round(p.firstAnswerMs - p.firstReportMs),
      answered_in_time: p.answeredInTime,
      last_share_per_second: Math.round(lastShare(p) * 10) / 10,
      replacements: p.replacements.length,
      assignments: p.assignments.length,
      stream_error: p.streamError,
    })),
  };
  let failure = null;
  try {
    for (const p of planes) {
      assert.equal(p.streamError, null, `${p.name}: the stream failed`);
      assert.equal(p.answeredInTime, true,
                   `${p.name}: no answer before the first reporting interval ended`);
    }
    assert.ok(assigned <= storeLimit,
              `assigned ${assigned} > the store's bound ${storeLimit} (burst + rate x elapsed)`);
    assert.ok(admitted <= storeLimit + oneAssignmentPerStream + replaced,
              `admitted ${admitted} > ${storeLimit} + one assignment per stream ` +
              `(${oneAssignmentPerStream}) + replaced buckets (${replaced})`);
    if (config.check_shares) checkShares();
  } catch (e) {
    failure = e.message;
  }
  function checkShares() {
    const byDemand = [...planes].sort((a, b) => a.demand - b.demand);
    const light = byDemand[0];
    const heavy = byDemand[byDemand.length - 1];
    assert.ok(lastShare(heavy) > lastShare(light),
              `the heavier plane ${heavy.name} (${lastShare(heavy)}/s) is not assigned more ` +
              `than the light ${light.name} (${lastShare(light)}/s)`);
    // The light plane asks less than an equal split: max-min gives it its demand, so in the
    // measured window it is refused at most a tenth of what it offered.
    const offered = light.demand * (window.to - window.from) / 1000;
    assert.ok(measuring.denied[light.name] <= offered / 10,
              `the light plane was refused ${measuring.denied[light.name]} of about ${offered}`);
  }
  summary.failure = failure;
  console.log(JSON.stringify(summary));
  process.exit(failure === null ? 0 : 1);
}

main().catch((e) => {
  console.log(JSON.stringify({ failure: String(e && e.stack || e) }));
  process.exit(2);
});
