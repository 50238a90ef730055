import { type Context, textWithin } from '@dsh/context'
import type { SessionPersistenceCoordinator, UnstoredSession } from '@dsh/session-persistence'
import { HostError } from './errors.js'

/** Sessions named in the error's details; the rest are counted. */
const NAMED_SESSIONS = 20

/**
 * Disposes a host's context (the persistence flushes last, retrying a store
 * that is restarting for a while), then answers for what it could not store:
 * the events are lost with the process, so a host that ends with any says so
 * (`HOST_EVENTS_NOT_STORED`) instead of ending as if it had stored them.
 */
export async function disposeHost(ctx: Context, coordinator: () => SessionPersistenceCoordinator | undefined): Promise<void> {
  await ctx.dispose()
  const unstored = coordinator()?.unstored() ?? []
  if (unstored.length > 0) throw notStored(unstored)
}

function notStored(unstored: readonly UnstoredSession[]): HostError {
  const events = unstored.reduce((sum, session) => sum + session.pending, 0)
  const first = unstored[0]!
  const others = unstored.length === 1 ? '' : ` and ${unstored.length - 1} more session(s)`
  const cause = unstored.find((session) => session.lastError !== undefined)?.lastError
  const why = cause instanceof Error ? `: ${cause.message}` : ''
  return new HostError(
    'HOST_EVENTS_NOT_STORED',
    `${events} event(s) of session '${textWithin(first.id, 80)}'${others} were not stored when the host closed${why}. The store did not take them in time; they are lost with this process.`,
    {
      ...(cause === undefined ? {} : { cause }),
      details: {
        events,
        sessions: unstored.slice(0, NAMED_SESSIONS).map(({ id, pending }) => ({ id, pending })),
        ...(unstored.length > NAMED_SESSIONS ? { moreSessions: unstored.length - NAMED_SESSIONS } : {}),
      },
    },
  )
}
