import { textHead } from '@dsh/context'
import type { StoredSessionEvent } from '@dsh/session'

/** Text longer than this per event is cut: search finds a transcript, it does not mirror it. */
export const MAX_EVENT_TEXT = 32 * 1024

/** How a backend makes text storable before it is trimmed and measured (e.g. PostgreSQL cannot hold NUL). */
export type EventTextClean = (text: string) => string

/**
 * The searchable text of an event, the one rule every index backend uses:
 * user and assistant messages, tool calls (name and the string values of
 * their arguments) and tool results (their string values). Streaming chunks
 * are left out because the final `assistant/message` carries the same text.
 * Other types carry no text. `clean` runs before trimming, so text that is
 * only unstorable characters counts as empty; the result is at most
 * {@link MAX_EVENT_TEXT} characters, cut between characters (never inside a
 * surrogate pair, which a backend would store as U+FFFD).
 */
export function eventText(event: StoredSessionEvent, clean?: EventTextClean): string | undefined {
  const data = event.data as Record<string, unknown> | null
  if (typeof data !== 'object' || data === null || Array.isArray(data)) return undefined
  let text: string
  switch (event.type) {
    case 'user/message':
    case 'assistant/message':
      text = typeof data.text === 'string' ? data.text : ''
      break
    case 'tool/call':
      text = [typeof data.name === 'string' ? data.name : '', ...strings(data.arguments)].join(' ')
      break
    case 'tool/result':
      text = strings(data.content).join(' ')
      break
    default:
      return undefined
  }
  text = (clean ? clean(text) : text).trim()
  if (text.length === 0) return undefined
  return textHead(text, MAX_EVENT_TEXT)
}

function strings(value: unknown, out: string[] = [], budget = { left: MAX_EVENT_TEXT }): string[] {
  if (budget.left <= 0) return out
  if (typeof value === 'string') {
    out.push(value)
    budget.left -= value.length
  } else if (Array.isArray(value)) {
    for (const item of value) strings(item, out, budget)
  } else if (typeof value === 'object' && value !== null) {
    for (const item of Object.values(value)) strings(item, out, budget)
  }
  return out
}
