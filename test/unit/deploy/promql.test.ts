import { describe, expect, it } from 'vitest';
import { exposedNames, metricRefs, unknownMetrics } from '../../integration/deploy/promql.js';

// The metric-name extraction the deployment tests rely on to check alerts and dashboards
// against the names the services really export: it must find every name and nothing else.
describe('metricRefs', () => {
  it('finds the names of a ratio with aggregations, label matchers and ranges', () => {
    const expr = `sum(rate(reach_dispatcher_retries_scheduled_total{code=~"300[23]"}[5m]))
      / sum by (instance) (rate(reach_dispatcher_routed_deliveries_total[5m])) > 0.10`;
    expect(metricRefs(expr)).toEqual({ names: ['reach_dispatcher_retries_scheduled_total', 'reach_dispatcher_routed_deliveries_total'], patterns: [] });
  });

  it('skips functions, keywords, label names in grouping clauses, strings, numbers and durations', () => {
    const expr = `histogram_quantile(0.99, sum without (instance) (rate(a_seconds_bucket{le!="+Inf", job="x and y"}[$__rate_interval] offset 1h)))
      and on (job) group_left (team) b_info unless ignoring (le) label_replace(c_total, "dst", "$1", "src", "(.*)") or vector(1e3) * -inf`;
    expect(metricRefs(expr).names).toEqual(['a_seconds_bucket', 'b_info', 'c_total']);
  });

  it('reads names given as __name__ matchers, exact and regex', () => {
    expect(metricRefs('sum({__name__="x_total", a="b"}) + max({__name__=~"reach_.+_lag"})')).toEqual({ names: ['x_total'], patterns: ['reach_.+_lag'] });
  });

  it('handles subqueries, bool comparisons and a bare selector', () => {
    expect(metricRefs('max_over_time(deriv(lag_messages[10m])[1h:1m]) > bool 0').names).toEqual(['lag_messages']);
    expect(metricRefs('up').names).toEqual(['up']);
  });
});

describe('exposedNames', () => {
  const text = ['# HELP h_seconds help', '# TYPE h_seconds histogram', '# HELP c_total help', '# TYPE c_total counter', 'c_total{code="1"} 3', 'g 1'].join(
    '\n',
  );

  it('counts declared histograms without observations with their series, and samples', () => {
    expect([...exposedNames(text)].sort()).toEqual(['c_total', 'g', 'h_seconds', 'h_seconds_bucket', 'h_seconds_count', 'h_seconds_sum']);
  });

  it('reports what an expression reads that is not exported, allowing Prometheus-made series', () => {
    const names = exposedNames(text);
    expect(unknownMetrics('rate(c_total[5m]) + up + missing_total', names)).toEqual(['missing_total']);
    expect(unknownMetrics('{__name__=~"h_.+_sum"} + {__name__=~"nope_.*"}', names)).toEqual(['{__name__=~"nope_.*"}']);
  });
});
