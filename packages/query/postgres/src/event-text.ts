import type { StoredSessionEvent } from '@dsh/session'
import { eventText as sharedEventText } from '@dsh/session-query/backend'

const NUL = String.fromCharCode(0)

/**
 * PostgreSQL text cannot hold NUL (and it separates nothing, so it becomes a
 * space), nor lone surrogates (they become U+FFFD).
 */
function storable(text: string): string {
  return text.replaceAll(NUL, ' ').replace(/\p{Cs}/gu, '\uFFFD')
}

/** The searchable text of an event, by the rules of `@dsh/session-query`, made storable in PostgreSQL. */
export function eventText(event: StoredSessionEvent): string | undefined {
  return sharedEventText(event, storable)
}
