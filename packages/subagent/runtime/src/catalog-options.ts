import { SubagentError } from './errors.js'

/**
 * How many per-child tasks of a listing (and so cold body reads) run at once
 * when none is configured. A cold read is one body-bearing observation: a
 * read of local files on the JSONL backend, one pooled query on PostgreSQL.
 */
export const DEFAULT_COLD_READ_CONCURRENCY = 4
/** The most per-child tasks a listing may run at once. */
export const MAX_COLD_READ_CONCURRENCY = 64

/** Options of a listing (and of `subagentsPlugin`, which passes them to every listing). */
export interface SubagentCatalogOptions {
  /** Per-child tasks in flight: an integer from 1 to 64 (default 4). */
  readonly coldReadConcurrency?: number
}

/** The configured cold-read concurrency, or `SUBAGENT_INVALID_OPTIONS` naming what is wrong. */
export function coldReadConcurrencyOf(options: SubagentCatalogOptions | undefined): number {
  const value: unknown = options?.coldReadConcurrency
  if (value === undefined) return DEFAULT_COLD_READ_CONCURRENCY
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > MAX_COLD_READ_CONCURRENCY) {
    throw new SubagentError(
      'SUBAGENT_INVALID_OPTIONS',
      `coldReadConcurrency must be an integer from 1 to ${MAX_COLD_READ_CONCURRENCY}, got ${describe(value)}.`,
      { details: { option: 'coldReadConcurrency' } },
    )
  }
  return value
}

function describe(value: unknown): string {
  return typeof value === 'number' ? String(value) : (JSON.stringify(value) ?? typeof value)
}
