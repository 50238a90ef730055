import { existsSync } from 'node:fs'
import type { ApiServer } from '@dsh/apiproxy'
import type { CompactionServiceOptions, Summarizer } from '@dsh/compaction'
import type { SessionProjections } from '@dsh/session-projection'
import type { SessionProjectionCache } from '@dsh/session-projection-cache'
import type { PriceTable } from '@dsh/session-stats'
import type { SubagentDriver, SubagentRuntime, SubagentToolProvider } from '@dsh/subagent'
import { activateCompaction } from './compaction.js'
import { activateHttpApi, type HttpApiOptions } from './http-plugin.js'
import { type DerivedPaths, derivedPaths } from './paths.js'
import { activatePostgresCache } from './postgres.js'
import { type CompositionStage, composeBase, type QueryHost, type QueryHostOptions } from './query-host.js'

export interface HostOptions extends QueryHostOptions {
  /** The SQLite checkpoint cache under the root (default true). */
  readonly projectionCache?: boolean
  /** Runs subagent turns (default: a scripted driver; no model is called). */
  readonly driver?: SubagentDriver
  /** The tools every subagent run may call, narrowed by each child's `toolFilter` (e.g. `subagentControlTools`). */
  readonly tools?: SubagentToolProvider
  readonly maxDepth?: number
  /**
   * How many children a subagent listing classifies at once (cold children
   * cost one body read each): an integer from 1 to 64, default 4. Anything
   * else fails `createHost` with `SUBAGENT_INVALID_OPTIONS`.
   */
  readonly coldReadConcurrency?: number
  /**
   * The price table subagent cost budgets count with: the runtime's
   * `pricing` prices each model call by it (`costOf` of
   * `@dsh/session-stats`). Without it a spawn with a cost budget is refused.
   * With `http`, the API prices its listing's and stats route's cost by it.
   */
  readonly prices?: PriceTable
  /**
   * Register the `sessionStats` and `sessionTitle` units (default true). A
   * short read command that needs neither (the catalog) may leave them out so
   * it loads less; writers keep them, so the cache checkpoints them.
   */
  readonly sessionStats?: boolean
  /** Serve the HTTP API and web page (activated last, closed first). */
  readonly http?: HttpApiOptions
  /** Provide service `sessionContext` (`@dsh/session-context`) without a driver: a read-only host too (`dsh show --context`). */
  readonly sessionContext?: boolean
  /** Writes compaction summaries: with it a writable host provides service `compaction` (`@dsh/compaction`). */
  readonly summarizer?: Summarizer
  /** Options of the compaction service (with `summarizer`). */
  readonly compaction?: CompactionServiceOptions
}

/** The composed services of one process over one session root. */
export interface Host extends QueryHost {
  readonly projections: SessionProjections
  readonly cache: SessionProjectionCache | undefined
  readonly subagents: SubagentRuntime
  /** The listening HTTP API when `http` was given. */
  readonly http: ApiServer | undefined
  /** The root's derived files (index, cache); `undefined` for a PostgreSQL host, which keeps them in the database. */
  readonly paths: DerivedPaths | undefined
  /** Settles runs, writes final checkpoints, flushes and closes everything (reverse activation order). */
  dispose(): Promise<void>
}

/**
 * The composition root with the embedded defaults: JSONL+zstd persistence,
 * the projection registry with the SQLite checkpoint cache, the SQLite query
 * index, the subagent runtime and, when asked, the HTTP API. Activation order
 * is the disposal order reversed: the HTTP API stops first, subagent runs
 * settle, the cache writes its final checkpoints while persistence is still
 * open, and persistence flushes last. A failed activation disposes what was
 * activated before rethrowing. The projection, cache and subagent packages
 * load here, when a host is created (not when `@dsh/host` is imported), so a
 * process that needs only `createQueryHost` never loads them.
 */
export async function createHost(options: HostOptions): Promise<Host> {
  const loads = startLoads(options)
  const base = await composeBase(options, (stage) => activateProjections(stage, options, loads))
  const { ctx } = base
  try {
    const { createScriptedDriver, subagentsPlugin } = await loads.subagent
    const table = options.prices
    const costOf = table === undefined ? undefined : (await loads.stats)?.costOf
    await ctx.activate(
      subagentsPlugin({
        ...(table === undefined || costOf === undefined
          ? {}
          : { pricing: (step) => costOf({ byModel: [{ ...step, calls: 1, callsWithoutUsage: 0 }] }, table) }),
        driver: options.driver ?? createScriptedDriver(),
        ...(options.maxDepth === undefined ? {} : { maxDepth: options.maxDepth }),
        ...(options.coldReadConcurrency === undefined ? {} : { coldReadConcurrency: options.coldReadConcurrency }),
        ...(options.tools === undefined ? {} : { tools: options.tools }),
        // A read-only host lists children and starts no run (nor loads what spawning needs).
        ...(options.readOnly === true ? { readOnly: true } : {}),
      }),
    )
    if (options.http !== undefined) await activateHttpApi(ctx, options.http, table)
    return {
      ...base,
      sessions: ctx.require('sessions'),
      persistence: ctx.require('sessionPersistence'),
      projections: ctx.require('sessionProjections'),
      cache: ctx.get('sessionProjectionCache'),
      query: ctx.require('sessionQuery'),
      subagents: ctx.require('subagents'),
      http: ctx.get('httpServer'),
      paths: options.postgres === undefined ? derivedPaths(base.root) : undefined,
    }
  } catch (error) {
    await ctx.dispose()
    throw error
  }
}

/**
 * The projection registry with the `sessionStats` and `sessionTitle` units
 * (unless `sessionStats: false`) and, unless turned off, its checkpoint cache (read-only hosts use a cache
 * file only if it exists).
 */
async function activateProjections({ ctx, readOnly, root, pool }: CompositionStage, options: HostOptions, loads: Loads): Promise<void> {
  await ctx.activate((await loads.projection)())
  // A host given a model driver folds each session's model-visible context as a unit (checkpointed like
  // the others), so the driver builds every request from it in the cost of the events since its last step.
  const contextPlugin = await loads.context
  if (contextPlugin !== undefined) await ctx.activate(contextPlugin())
  if (options.summarizer !== undefined && !readOnly) await activateCompaction(ctx, options.summarizer, options.compaction)
  // Usage, timing and titles are units like any other: checkpointed by the cache, so cold reads cost no body read.
  const stats = options.sessionStats === false ? undefined : await loads.stats
  if (stats !== undefined) await ctx.activate(stats.sessionStatsPlugin())
  if (options.projectionCache === false) return
  if (pool !== undefined && options.postgres !== undefined) {
    await activatePostgresCache(ctx, pool, options.postgres, readOnly)
  } else if (root !== undefined) {
    const path = derivedPaths(root).projectionCache
    if (readOnly && !existsSync(path)) return
    const cachePlugin = await loads.cache
    if (cachePlugin !== undefined) await ctx.activate(cachePlugin({ path, ...(readOnly ? { readOnly: true } : {}) }))
  }
}

/**
 * What a host of given options loads, each import already under way (see
 * `startLoads`). Each names the exports it uses, so the bundle keeps only
 * those (a package's whole namespace would bring what they do not need).
 */
interface Loads {
  readonly projection: Promise<typeof import('@dsh/session-projection').sessionProjectionsPlugin>
  readonly context: Promise<typeof import('@dsh/session-context').sessionContextPlugin | undefined>
  readonly stats: Promise<Pick<typeof import('@dsh/session-stats'), 'sessionStatsPlugin' | 'costOf'> | undefined>
  readonly cache: Promise<typeof import('@dsh/session-projection-cache').sessionProjectionCachePlugin | undefined>
  readonly subagent: Promise<Pick<typeof import('@dsh/subagent'), 'createScriptedDriver' | 'subagentsPlugin'>>
}

/**
 * Starts loading, all at once, the packages these options need; each is
 * awaited where it is activated. Awaited one after another, every package
 * would cost its own round of file reads before the next one started. Only
 * what the options name is loaded. A failed load is reported where it is
 * awaited (never as an unhandled rejection when composition fails first).
 */
function startLoads(options: HostOptions): Loads {
  const early = <T>(load: Promise<T>): Promise<T> => {
    load.catch(() => {})
    return load
  }
  const none = Promise.resolve(undefined)
  const readOnly = options.readOnly === true
  return {
    projection: early(import('@dsh/session-projection').then(({ sessionProjectionsPlugin }) => sessionProjectionsPlugin)),
    context:
      (options.driver !== undefined && !readOnly) || options.sessionContext === true
        ? early(import('@dsh/session-context').then(({ sessionContextPlugin }) => sessionContextPlugin))
        : none,
    stats:
      options.sessionStats !== false || options.prices !== undefined
        ? early(import('@dsh/session-stats').then(({ sessionStatsPlugin, costOf }) => ({ sessionStatsPlugin, costOf })))
        : none,
    cache:
      options.projectionCache !== false && options.postgres === undefined
        ? early(import('@dsh/session-projection-cache').then(({ sessionProjectionCachePlugin }) => sessionProjectionCachePlugin))
        : none,
    subagent: early(
      import('@dsh/subagent').then(({ createScriptedDriver, subagentsPlugin }) => ({ createScriptedDriver, subagentsPlugin })),
    ),
  }
}
