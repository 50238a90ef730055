import type { StoredSessionEvent } from '@dsh/session'

/** Text longer than this per event is cut: search finds a transcript, it does not mirror it. */
export const MAX_EVENT_TEXT = 32 * 1024

const NUL = String.fromCharCode(0)

/**
 * The searchable text of an event, by the same rules as the SQLite index:
 * user and assistant messages, tool calls (name and string arguments) and
 * tool results; streaming chunks are left out (the final message repeats
 * them). NUL cannot be stored in PostgreSQL text and separates nothing, so
 * it becomes a space.
 */
export function eventText(event: StoredSessionEvent): string | undefined {
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
  text = text
    .replaceAll(NUL, ' ')
    .replace(/\p{Cs}/gu, '\uFFFD')
    .trim()
  if (text.length === 0) return undefined
  return text.length > MAX_EVENT_TEXT ? text.slice(0, MAX_EVENT_TEXT) : text
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
