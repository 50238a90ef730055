import type { CompactionService } from '@dsh/compaction'
import type { Context } from '@dsh/context'
import type { SubagentListEntryBody, SubagentListRung } from '@dsh/protocol'
import type { SessionStore } from '@dsh/session'
import type { SessionPersistence } from '@dsh/session-persistence'
import type { SessionProjections } from '@dsh/session-projection'
import type { SessionQuery } from '@dsh/session-query'
import type { ListingSources, PriceTable } from '@dsh/session-stats'
// Brings in the `subagents` service declaration (the runtime is what `ctx` provides).
import type { SubagentRuntime } from '@dsh/subagent'
import { ApiError } from './errors.js'

/** A catalog row as the subagent runtime returns it (`SubagentListEntry`), whose one declaration is `@dsh/protocol`'s. */
export type SubagentCatalogRow = Readonly<SubagentListEntryBody>

/** A catalog row with its place in the tree and the ladder rung that decided it. */
export interface ExplainedCatalogRow {
  readonly row: SubagentCatalogRow
  readonly rung: SubagentListRung
  /** The session whose child the row is. */
  readonly parentId: string
  /** 1 for a direct child of the listed session, 2 for a grandchild, … */
  readonly depth: number
}

/** The part of the `subagents` service (`SubagentRuntime`) the host uses. */
export interface ApiSubagentCatalog {
  explainChildren(parentId: string, signal?: AbortSignal): Promise<readonly ExplainedCatalogRow[]>
  explainDescendants(parentId: string, signal?: AbortSignal): Promise<readonly ExplainedCatalogRow[]>
  /** Projection values of a session's tree through the catalog's ladder (`SubagentRuntime.treeSnapshots`); the stats route needs it. */
  treeSnapshots?: SubagentRuntime['treeSnapshots']
}

/** What the API reads from. `sessions` and `sessionProjections` feed the SSE stream; without them it only sends keep-alives. */
export interface ApiServices {
  readonly sessionQuery: SessionQuery
  readonly subagents: ApiSubagentCatalog
  readonly sessions?: SessionStore | undefined
  readonly sessionProjections?: SessionProjections | undefined
  /** Where the session listing reads titles, tokens and cost of sessions that are not live (never a log). */
  readonly sessionProjectionCache?: ListingSources['cache']
  /**
   * The persistence service: the attachment routes read bytes through it
   * (without `readAttachment` they answer 503), and the event stream follows
   * its change feed and writer locks for writes made by other processes.
   */
  readonly sessionPersistence?: PersistenceReader | undefined
  /** Serves `POST /api/sessions/:id/compact` (with `sessions` and `sessionLoader`); without it that route answers 501. */
  readonly compaction?: CompactionService | undefined
  /** Where the compaction route loads a session that is not live, as a writer (its crash repair runs): the persistence service. */
  readonly sessionLoader?: Pick<SessionPersistence, 'load'> | undefined
  /** Prices the session listing's `cost` and the stats route's `cost` (USD per million tokens); without it both are `null`. */
  readonly prices?: PriceTable | undefined
}

/** The parts of the persistence service (`sessionPersistence`) the host reads: attachments, the change feed, writer locks. */
export interface PersistenceReader {
  readAttachment?(sessionId: string, digest: string, signal?: AbortSignal): Promise<Uint8Array>
  changes?(
    since?: string,
    signal?: AbortSignal,
  ): Promise<{ readonly ids: readonly string[]; readonly cursor: string; readonly rescan: boolean }>
  writerOf?(id: string, signal?: AbortSignal): Promise<{ readonly pid: number; readonly host: string } | undefined>
}

/** The session lifecycle events the stream listens to (a `Context` has them). */
export type ApiEventSource = Pick<Context, 'on'>

/**
 * Takes services from `overrides` first, then from `ctx`. A missing required
 * service fails at server creation, naming it, rather than on the first request.
 */
export function resolveServices(ctx: Context | undefined, overrides: Partial<ApiServices> | undefined): ApiServices {
  const sessionQuery = overrides?.sessionQuery ?? ctx?.get('sessionQuery')
  const subagents = overrides?.subagents ?? ctx?.get('subagents')
  if (sessionQuery === undefined) throw missing('sessionQuery')
  if (subagents === undefined) throw missing('subagents')
  return {
    sessionQuery,
    subagents,
    sessions: overrides?.sessions ?? ctx?.get('sessions'),
    sessionProjections: overrides?.sessionProjections ?? ctx?.get('sessionProjections'),
    sessionProjectionCache: overrides?.sessionProjectionCache ?? ctx?.get('sessionProjectionCache'),
    sessionPersistence: overrides?.sessionPersistence ?? (ctx?.get('sessionPersistence') as PersistenceReader | undefined),
    compaction: overrides?.compaction ?? ctx?.get('compaction'),
    sessionLoader: overrides?.sessionLoader ?? ctx?.get('sessionPersistence'),
    prices: overrides?.prices,
  }
}

function missing(service: string): ApiError {
  return new ApiError(
    'API_SERVICE_UNAVAILABLE',
    `The API server needs service '${service}': pass it in options.services or provide it on options.ctx before creating the server (or activate apiproxyPlugin, which fails at activation instead).`,
  )
}
