import { createHash } from 'node:crypto';
import { whenMatches } from './conditions.js';
import type { Rule, RuleInput, RuleSet, StringMatch } from './types.js';

/**
 * The compiled matcher: a two-level match tree, message_type then target_role, plus flat
 * indexes for source roles and tags.
 *
 * A level files each rule under its condition on one field: exact and any_of values in a Map,
 * prefixes in a Map probed once per distinct prefix length, no condition in a wildcard bucket.
 * Every message_type bucket holds a target_role level, whose buckets hold ascending rule
 * positions. A lookup collects, for the message's type and target, the few leaf lists that
 * accept both; each is exact on both fields, so their merge holds precisely the rules whose
 * first two conditions hold. When that is more than a handful, it is intersected (leapfrog
 * join) with the rules whose source-role and tag conditions may hold; each survivor is checked
 * in full in file order and the first that matches is the first match of a plain scan.
 * Lookup cost follows the number of rules written for the message's type and target, not the
 * number of rules in the file.
 */

type Lists = number[][];

/** Candidate count below which checking them beats intersecting with more indexes. */
const FEW = 8;
/** Rule count below which a plain scan beats any lookup (measured with `reach rules bench`). */
const SCAN_BELOW = 24;

class Level<B> {
  private readonly exact = new Map<string, B>();
  private readonly prefixes = new Map<string, B>();
  /** ascending distinct lengths of the indexed prefixes */
  private prefixLengths: number[] = [];
  private wildcard: B | undefined;

  constructor(private readonly bucket: () => B) {}

  /** The buckets a rule with this condition belongs in (several for any_of). */
  bucketsFor(cond: StringMatch | undefined): B[] {
    if (!cond) return [(this.wildcard ??= this.bucket())];
    if ('exact' in cond) return [this.slot(this.exact, cond.exact)];
    if ('any_of' in cond) return [...new Set(cond.any_of)].map((v) => this.slot(this.exact, v));
    if (!this.prefixLengths.includes(cond.prefix.length)) this.prefixLengths = [...this.prefixLengths, cond.prefix.length].sort((a, b) => a - b);
    return [this.slot(this.prefixes, cond.prefix)];
  }

  /** Pushes the buckets whose condition accepts `value` (null: only the wildcard one). */
  collect(value: string | null, out: B[], withWildcard = true): void {
    if (withWildcard && this.wildcard !== undefined) out.push(this.wildcard);
    if (value === null) return;
    const hit = this.exact.get(value);
    if (hit !== undefined) out.push(hit);
    for (const length of this.prefixLengths) {
      if (length > value.length) break;
      const bucket = this.prefixes.get(value.slice(0, length));
      if (bucket !== undefined) out.push(bucket);
    }
  }

  private slot(map: Map<string, B>, key: string): B {
    let bucket = map.get(key);
    if (bucket === undefined) map.set(key, (bucket = this.bucket()));
    return bucket;
  }
}

class TagIndex {
  private readonly byTag = new Map<string, number[]>();
  readonly wildcard: number[] = [];

  /** Each rule is filed under one of its tags, the rarest, so a message's tags reach few rules. */
  constructor(rules: readonly Rule[]) {
    const frequency = new Map<string, number>();
    for (const rule of rules) for (const tag of new Set(rule.when.custom_tags ?? [])) frequency.set(tag, (frequency.get(tag) ?? 0) + 1);
    rules.forEach((rule, id) => {
      const tags = rule.when.custom_tags ?? [];
      if (tags.length === 0) return this.wildcard.push(id);
      const rarest = tags.reduce((best, tag) => (frequency.get(tag)! < frequency.get(best)! ? tag : best));
      push(this.byTag, rarest, id);
    });
  }

  collect(tags: readonly string[], out: Lists): void {
    out.push(this.wildcard);
    for (const tag of new Set(tags)) {
      const rules = this.byTag.get(tag);
      if (rules) out.push(rules);
    }
  }
}

function push(map: Map<string, number[]>, key: string, id: number): void {
  const list = map.get(key);
  if (list) list.push(id);
  else map.set(key, [id]);
}

export class CompiledRuleSet implements RuleSet {
  private readonly tree = new Level(() => new Level<number[]>(() => []));
  private readonly sourceRole = new Level<number[]>(() => []);
  private readonly tags: TagIndex;

  constructor(
    readonly rules: readonly Rule[],
    readonly digest: string,
  ) {
    rules.forEach((rule, id) => {
      for (const byTarget of this.tree.bucketsFor(rule.when.message_type)) for (const leaf of byTarget.bucketsFor(rule.when.target_role)) leaf.push(id);
      for (const leaf of this.sourceRole.bucketsFor(rule.when.source_role)) leaf.push(id);
    });
    this.tags = new TagIndex(rules);
  }

  match(input: RuleInput): Rule | null {
    // A handful of rules: scanning them is cheaper than any lookup.
    if (this.rules.length < SCAN_BELOW) {
      for (const rule of this.rules) if (whenMatches(rule.when, input)) return rule;
      return null;
    }
    const byType: Level<number[]>[] = [];
    this.tree.collect(input.message_type, byType);
    const both = new Candidates([]);
    for (const level of byType) level.collect(input.target_role, both.lists);
    if (both.size() <= FEW) return this.firstMatch([both], input);

    const bySource = new Candidates([]);
    this.sourceRole.collect(null, bySource.lists);
    for (const role of input.source_roles) this.sourceRole.collect(role, bySource.lists, false);
    const byTags = new Candidates([]);
    this.tags.collect(input.tags, byTags.lists);
    return this.firstMatch([both, bySource, byTags], input);
  }

  /**
   * The lowest rule position present in every field's candidates that also matches in full
   * (tags are indexed by one tag, so a candidate may still lack another): a leapfrog join —
   * each field in turn jumps to its first candidate at or after the current position.
   */
  private firstMatch(fields: readonly Candidates[], input: RuleInput): Rule | null {
    let position = 0;
    let agreeing = 0;
    for (let i = 0; ; i = (i + 1) % fields.length) {
      const next = fields[i]!.seek(position);
      if (next === Infinity) return null;
      if (next !== position) {
        position = next;
        agreeing = 1;
      } else if (++agreeing >= fields.length) {
        const rule = this.rules[position]!;
        if (whenMatches(rule.when, input)) return rule;
        position++;
        agreeing = 0;
      }
    }
  }
}

/** The union of a few ascending lists of rule positions, read forwards with `seek`. */
class Candidates {
  private readonly cursors: number[] = [];

  constructor(readonly lists: Lists) {}

  size(): number {
    let n = 0;
    for (const list of this.lists) n += list.length;
    return n;
  }

  /** The smallest position >= `from` (Infinity when none). `from` never decreases between calls. */
  seek(from: number): number {
    let min = Infinity;
    for (let i = 0; i < this.lists.length; i++) {
      const list = this.lists[i]!;
      const c = gallop(list, this.cursors[i] ?? 0, from);
      this.cursors[i] = c;
      if (c < list.length && list[c]! < min) min = list[c]!;
    }
    return min;
  }
}

/** First index >= start whose value is >= target: exponential then binary search. */
function gallop(list: readonly number[], start: number, target: number): number {
  if (start >= list.length || list[start]! >= target) return start;
  let step = 1;
  let low = start;
  let high = start + 1;
  while (high < list.length && list[high]! < target) {
    low = high;
    step *= 2;
    high = low + step;
  }
  high = Math.min(high, list.length);
  // list[low] < target; the answer lies in (low, high]
  while (low + 1 < high) {
    const mid = (low + high) >>> 1;
    if (list[mid]! < target) low = mid;
    else high = mid;
  }
  return high;
}

export function sha256(source: string): string {
  return createHash('sha256').update(source, 'utf8').digest('hex');
}

/** Compiles rules (in file order: the array order is the match order) into a RuleSet. */
export function compileRules(rules: readonly Rule[], digest: string = sha256(JSON.stringify(rules))): RuleSet {
  return new CompiledRuleSet(rules, digest);
}

/** No rules: every message gets the router's default behaviour. */
export const EMPTY_RULES: RuleSet = compileRules([], sha256(''));
