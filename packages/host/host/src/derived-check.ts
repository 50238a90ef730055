import { existsSync } from 'node:fs'
import { Context, type Logger } from '@dsh/context'
import { SessionStore } from '@dsh/session'
import { createJsonlPersistence } from '@dsh/session-persistence-jsonl'
import { createSqliteSessionQuery } from '@dsh/session-query-sqlite'
import { createHost } from './host.js'
import { derivedPaths } from './paths.js'

/** One derived file after SQLite's `quick_check`. */
export interface DerivedCheck {
  readonly file: string
  /**
   * `ok`; `absent` (nothing to check; it is built when a writable host opens
   * the root); `damaged` (it failed the check, `problem` says why, and was
   * left as it is: derived data, so `dsh reindex` rebuilds the index, and a
   * removed cache is made again by the next writable host).
   */
  readonly status: 'ok' | 'absent' | 'damaged'
  readonly problem?: string
}

export interface DerivedChecks {
  readonly index: DerivedCheck
  readonly projectionCache: DerivedCheck
}

export interface CheckDerivedFilesOptions {
  /** Stops the index check (`quick_check` of a large index can take a while). */
  readonly signal?: AbortSignal
  /**
   * Where the readers' warnings go (a derived file that cannot be opened is
   * warned about as well as reported `damaged`); default: the console.
   */
  readonly logger?: Logger
}

/**
 * Runs `quick_check` over a root's derived files (what `dsh verify` adds to
 * the log check; never run on an ordinary open). Only files that exist are
 * opened, read-only, and none is created, changed or removed: a file that
 * fails the check is reported `damaged`. Logs are opened read-only. The root
 * must be a dsh root (`HOST_ROOT_INVALID`).
 */
export async function checkDerivedFiles(root: string, options: CheckDerivedFilesOptions = {}): Promise<DerivedChecks> {
  const { signal, logger } = options
  const host = await createHost({ root, readOnly: true, query: 'memory', ...(logger === undefined ? {} : { logger }) })
  let projectionCache: DerivedCheck
  try {
    const file = derivedPaths(host.root).projectionCache
    const problem = host.cache?.checkDatabase?.()
    projectionCache =
      problem === undefined ? { file, status: 'absent' } : problem === 'ok' ? { file, status: 'ok' } : { file, status: 'damaged', problem }
  } finally {
    await host.dispose()
  }
  return { index: await checkIndexFile(host.root, signal, logger), projectionCache }
}

async function checkIndexFile(root: string, signal: AbortSignal | undefined, logger: Logger | undefined): Promise<DerivedCheck> {
  const file = derivedPaths(root).index
  if (!existsSync(file)) return { file, status: 'absent' }
  const persistence = createJsonlPersistence({ root, readOnly: true })
  // The logger reaches the context (listener failures, the `logger` service) as `createHost` gives it.
  const ctx = new Context(logger === undefined ? {} : { logger })
  try {
    if (logger !== undefined) ctx.provide('logger', logger)
    // A reader: the check reads the file as it is and changes nothing, whatever it finds.
    const query = await createSqliteSessionQuery({
      sessions: new SessionStore(ctx),
      persistence,
      path: file,
      readOnly: true,
      ...(logger === undefined ? {} : { logger }),
    })
    try {
      const check = await query.checkIndex(signal)
      return check.ok ? { file, status: 'ok' } : { file, status: 'damaged', problem: check.problem }
    } finally {
      await query.close()
    }
  } finally {
    await persistence.close()
    await ctx.dispose()
  }
}
