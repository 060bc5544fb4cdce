import { readFile } from 'node:fs/promises';
import { ConfigError, type Logger } from '@reach/core';
import { EMPTY_RULES, formatDiagnostic, parseRules, type Diagnostic, type RuleSet } from '@reach/rules';
import { PeriodicJob } from '@reach/service-kit';

/** How often the rules file is re-read; a changed file applies within this. */
const RELOAD_MS = 1_000;

export interface RulesStatus {
  file: string | null;
  digest: string;
  rules: number;
  loaded_at: string | null;
  /** The last reload that failed validation (the previous rules stayed in force), until a good one. */
  rejected: { at: string; diagnostics: string[] } | null;
}

/**
 * The router's ReachRules (R-B11): compiled at start, then hot-reloaded. The file is
 * re-read every second (fs.watch misses editors that replace the file and network volumes;
 * a 1 s read of a small file costs nothing) and recompiled only when its digest changed.
 * An invalid file at start stops the router (a rolling update then keeps the old instances);
 * an invalid file later keeps the last good rules and logs every diagnostic with its line.
 */
export class RulesWatcher {
  private rules: RuleSet = EMPTY_RULES;
  private loadedAt: Date | null = null;
  private rejected: RulesStatus['rejected'] = null;
  private lastSource: string | null = null;
  private readonly job: PeriodicJob;

  constructor(
    private readonly file: string | null,
    private readonly log: Logger,
    private readonly onReload: (result: 'applied' | 'invalid' | 'unreadable') => void = () => undefined,
  ) {
    this.job = new PeriodicJob('rules reload', RELOAD_MS, () => this.reload(), log);
  }

  get current(): RuleSet {
    return this.rules;
  }

  async start(): Promise<void> {
    if (this.file === null) return;
    const source = await readFile(this.file, 'utf8').catch((err: Error) => {
      throw new ConfigError(`REACH_RULES_FILE=${this.file}: cannot read it (${err.message})`);
    });
    const { rules, diagnostics } = parseRules(source, this.file);
    if (!rules) throw new ConfigError(`REACH_RULES_FILE=${this.file} is invalid:\n${diagnostics.map(formatDiagnostic).join('\n')}`);
    this.apply(source, rules, diagnostics);
    this.job.start();
  }

  stop(): Promise<void> {
    return this.job.stop();
  }

  status(): RulesStatus {
    return {
      file: this.file,
      digest: this.rules.digest,
      rules: this.rules.rules.length,
      loaded_at: this.loadedAt?.toISOString() ?? null,
      rejected: this.rejected,
    };
  }

  /** Reads the file now instead of at the next tick (POST /v1/rules/reload); the status after it. */
  async reloadNow(): Promise<RulesStatus> {
    await this.reload();
    return this.status();
  }

  private async reload(): Promise<void> {
    if (this.file === null) return;
    let source: string;
    try {
      source = await readFile(this.file, 'utf8');
    } catch (err) {
      if (this.lastSource !== '') {
        this.log.error({ err, file: this.file }, 'cannot read the rules file; keeping the rules in force');
        this.onReload('unreadable');
      }
      this.lastSource = '';
      return;
    }
    if (source === this.lastSource) return;
    this.lastSource = source;
    const { rules, diagnostics } = parseRules(source, this.file);
    if (!rules) {
      this.rejected = { at: new Date().toISOString(), diagnostics: diagnostics.map(formatDiagnostic) };
      this.log.error(
        { file: this.file, diagnostics: this.rejected.diagnostics, kept_digest: this.rules.digest },
        `rules file rejected, the previous ${this.rules.rules.length} rules stay in force: ${this.rejected.diagnostics[0] ?? 'invalid'}`,
      );
      this.onReload('invalid');
      return;
    }
    if (rules.digest === this.rules.digest) return;
    this.apply(source, rules, diagnostics);
    this.onReload('applied');
  }

  private apply(source: string, rules: RuleSet, diagnostics: readonly Diagnostic[]): void {
    this.lastSource = source;
    this.rules = rules;
    this.loadedAt = new Date();
    this.rejected = null;
    for (const d of diagnostics) this.log.warn({ file: this.file }, formatDiagnostic(d));
    this.log.info({ file: this.file, rules: rules.rules.map((r) => r.name), digest: rules.digest }, `rules loaded: ${rules.rules.length}`);
  }
}
