import { z } from 'zod'
import { jsonValue, sessionId } from './primitives.js'

// Server-Sent Events of `GET /api/sessions/:id/stream`. Each message is one
// `event:` name and one `data:` line of JSON.

/** `event: ready`: the stream is subscribed; refetch anything shown before it. */
export const streamReady = z.object({ sessionId })

/** `event: projection`: a projection view of the streamed session changed. */
export const streamProjection = z.object({
  sessionId,
  key: z.string().min(1),
  seq: z.number().int().min(-1),
  /** The new view; absent when the key became absent (its unit failed for this session). */
  view: jsonValue.optional(),
})

/**
 * `event: catalog`: a subagent below the streamed session was created, ended a
 * turn, went cold or changed a projection. Ids only, never event data; a page
 * refetches the row.
 */
export const streamCatalog = z.object({
  sessionId,
  parentId: sessionId,
  childId: sessionId,
  reason: z.enum(['created', 'turn-end', 'disposed', 'projection']),
})

/**
 * `event: written`: session `id` (the streamed session, or one below it) was
 * written by another process (the persistence change feed), or that
 * process's writer lock went away. `writer` says who holds the lock now:
 * `other-process` (being written), `this-process`, or `none` (at rest).
 * Ids only, never event data; a page refetches what it shows.
 */
export const streamWritten = z.object({
  sessionId,
  id: sessionId,
  writer: z.enum(['other-process', 'this-process', 'none']),
})

/** The event names a stream carries; a reader skips others (a newer host may add some). */
export const STREAM_EVENT_NAMES = ['ready', 'projection', 'catalog', 'written'] as const

export const streamEvent = z.discriminatedUnion('event', [
  z.object({ event: z.literal('ready'), data: streamReady }),
  z.object({ event: z.literal('projection'), data: streamProjection }),
  z.object({ event: z.literal('catalog'), data: streamCatalog }),
  z.object({ event: z.literal('written'), data: streamWritten }),
])
