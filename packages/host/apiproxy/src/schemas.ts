import { z } from 'zod'

// The wire contract of the HTTP API. This module imports nothing but zod so
// that `@dsh/client` (and a browser bundle) can share it through the
// `@dsh/apiproxy/schemas` entry without pulling in the server.

const nonNegativeInt = z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER)
const id = z.string().min(1)

/** Every error answer: a stable machine-readable code and a message a person can act on. */
export const errorBody = z.object({ code: z.string().min(1), message: z.string() })

export const sessionHeader = z.object({
  version: z.literal(1),
  id,
  createdAt: nonNegativeInt,
  cwd: z.string().optional(),
  parentSession: id.optional(),
  isSeeded: z.boolean(),
  delegationDepth: nonNegativeInt,
  origin: z.literal('subagent').optional(),
  agentPreset: z.string().optional(),
})

export const sessionRecord = z.object({
  header: sessionHeader,
  inheritedEventCount: nonNegativeInt,
  live: z.boolean(),
  persisted: z.boolean(),
  revision: z.string().optional(),
})

/** `GET /api/sessions`: records ordered by createdAt, then id. */
export const sessionListPage = z.object({
  sessions: z.array(sessionRecord),
  nextCursor: z.string().optional(),
})

export const storedEvent = z.object({
  type: z.string().min(1),
  seq: nonNegativeInt,
  time: z.number(),
  data: z.json(),
})

/** `GET /api/sessions/:id/history` and `GET /api/sessions/:parentId/subagents/:childId/history`. */
export const historyPage = z.object({
  header: sessionHeader,
  inheritedEventCount: nonNegativeInt,
  events: z.array(storedEvent),
  nextBefore: nonNegativeInt.optional(),
  total: nonNegativeInt,
})

const childBase = {
  kind: z.literal('child'),
  id,
  activity: z.enum(['running', 'inactive']),
  hasChildren: z.boolean(),
}

/** One row of a parent's subagent catalog, in the shape `listChildren` returns. */
export const subagentRow = z.union([
  z.object({ ...childBase, mode: z.literal('one-shot'), label: z.string().optional() }),
  z.object({ ...childBase, mode: z.literal('continuable'), label: z.string() }),
  z.object({ kind: z.literal('diagnostic'), id, reason: z.enum(['corrupt', 'unsupported', 'unavailable']) }),
])

export const subagentScope = z.enum(['children', 'descendants'])

/**
 * A row of a subagent listing on the wire: the catalog row plus where it sits
 * in the tree (`parentId` is the session whose catalog holds the row, `depth`
 * is 1 for a direct child) and which rung of the projection ladder decided it
 * (1 live watermark, 2 checkpoint cache, 3 one cold read + fold).
 */
export const subagentListRow = z.intersection(
  subagentRow,
  z.object({ parentId: id, depth: z.number().int().min(1), rung: z.union([z.literal(1), z.literal(2), z.literal(3)]) }),
)

/** `GET /api/sessions/:id/subagents?scope=children|descendants`. */
export const subagentList = z.object({
  parentId: id,
  scope: subagentScope,
  rows: z.array(subagentListRow),
})

export const searchKind = z.enum(['sessions', 'events'])

export const sessionSearchHit = z.object({
  record: sessionRecord,
  score: z.number(),
  matches: nonNegativeInt,
})

export const eventSearchHit = z.object({
  id,
  seq: nonNegativeInt,
  type: z.string(),
  snippet: z.string(),
  score: z.number(),
})

/** `GET /api/search?q&kind=sessions|events`. */
export const searchPage = z.discriminatedUnion('kind', [
  z.object({ kind: z.literal('sessions'), hits: z.array(sessionSearchHit), nextCursor: z.string().optional() }),
  z.object({ kind: z.literal('events'), hits: z.array(eventSearchHit), nextCursor: z.string().optional() }),
])

/** SSE `event: ready`: the stream is subscribed; refetch anything shown before it. */
export const streamReady = z.object({ sessionId: id })

/** SSE `event: projection`: a projection view of the streamed session changed. */
export const streamProjection = z.object({
  sessionId: id,
  key: z.string().min(1),
  seq: z.number().int().min(-1),
  /** The new view; absent when the key became absent (its unit failed for this session). */
  view: z.json().optional(),
})

/**
 * SSE `event: catalog`: something about a subagent under the streamed session
 * changed (it was created, ended a turn, went cold or changed a projection).
 * It carries no event data; a page refetches the catalog row.
 */
export const streamCatalog = z.object({
  sessionId: id,
  parentId: id,
  childId: id,
  reason: z.enum(['created', 'turn-end', 'disposed', 'projection']),
})

export const streamEvent = z.discriminatedUnion('event', [
  z.object({ event: z.literal('ready'), data: streamReady }),
  z.object({ event: z.literal('projection'), data: streamProjection }),
  z.object({ event: z.literal('catalog'), data: streamCatalog }),
])

/** Every response schema, by name. */
export const schemas = Object.freeze({
  errorBody,
  sessionHeader,
  sessionRecord,
  sessionListPage,
  storedEvent,
  historyPage,
  subagentRow,
  subagentListRow,
  subagentScope,
  subagentList,
  searchKind,
  sessionSearchHit,
  eventSearchHit,
  searchPage,
  streamReady,
  streamProjection,
  streamCatalog,
  streamEvent,
})

export type ErrorBody = z.infer<typeof errorBody>
export type WireSessionHeader = z.infer<typeof sessionHeader>
export type WireSessionRecord = z.infer<typeof sessionRecord>
export type SessionListPageBody = z.infer<typeof sessionListPage>
export type WireStoredEvent = z.infer<typeof storedEvent>
export type HistoryPageBody = z.infer<typeof historyPage>
export type SubagentRowBody = z.infer<typeof subagentRow>
export type SubagentListRowBody = z.infer<typeof subagentListRow>
export type SubagentScope = z.infer<typeof subagentScope>
export type SubagentListBody = z.infer<typeof subagentList>
export type SearchKind = z.infer<typeof searchKind>
export type SessionSearchHitBody = z.infer<typeof sessionSearchHit>
export type EventSearchHitBody = z.infer<typeof eventSearchHit>
export type SearchPageBody = z.infer<typeof searchPage>
export type StreamEventBody = z.infer<typeof streamEvent>
export type StreamReadyBody = z.infer<typeof streamReady>
export type StreamProjectionBody = z.infer<typeof streamProjection>
export type StreamCatalogBody = z.infer<typeof streamCatalog>
