import type { JsonValue } from '@dsh/session'
import type { ContextMessage, SessionContext } from '@dsh/session-context'

/** How the model reads notice events: event type → text, or `undefined` for a notice it should not see. */
export type Notices = Readonly<Record<string, (data: JsonValue) => string | undefined>>

/**
 * How the model reads what its children tell it: a `subagent/notice`
 * (`settled` when a child's run ended, `report` when a child reported) is
 * input on the parent's next step. Other `subagent/*` events are the
 * runtime's bookkeeping and stay out of the context.
 */
export const DEFAULT_NOTICES: Notices = {
  'subagent/notice': (data) => {
    if (data === null || typeof data !== 'object' || Array.isArray(data)) return undefined
    const notice = data as { readonly [key: string]: JsonValue }
    const who = typeof notice.label === 'string' ? `${JSON.stringify(notice.label)} (${String(notice.child)})` : String(notice.child)
    if (notice.kind === 'report' && typeof notice.text === 'string') return `[report from subagent ${who}]\n${notice.text}`
    if (notice.kind === 'settled') {
      const body = typeof notice.text === 'string' ? `\n${notice.text}` : typeof notice.error === 'string' ? `\n${notice.error}` : ''
      return `[subagent ${who} settled: ${String(notice.reason)}]${body}`
    }
    return undefined
  },
}

/** A context message holding a notice (the fold's `{type: 'notice', event, data}` block), or undefined. */
function noticeOf(message: ContextMessage): { readonly event: string; readonly data: JsonValue } | undefined {
  const block = message.blocks[0] as { readonly type: string; readonly event?: unknown; readonly data?: JsonValue } | undefined
  if (message.role !== 'user' || block?.type !== 'notice' || typeof block.event !== 'string') return undefined
  return { event: block.event, data: block.data ?? null }
}

/** Phrased notice messages by notice table and context message (`null`: a notice no phrasing reads). */
export type PhrasedNotices = WeakMap<Notices, WeakMap<ContextMessage, ContextMessage | null>>

/**
 * `message` with its notice phrased as user text by `notices` (else
 * {@link DEFAULT_NOTICES}): the message itself when it holds no notice,
 * `null` for a notice no phrasing reads. Each phrased message is made once
 * per notice table and kept in `cache` (`onPhrased` is called when one is
 * made), so the same notice is always the same object.
 */
export function phraseNotice(
  message: ContextMessage,
  cache: PhrasedNotices,
  notices: Notices | undefined,
  onPhrased?: () => void,
): ContextMessage | null {
  const notice = noticeOf(message)
  if (notice === undefined) return message
  const table = notices ?? DEFAULT_NOTICES
  let phrased = cache.get(table)
  if (phrased === undefined) {
    phrased = new WeakMap()
    cache.set(table, phrased)
  }
  let out = phrased.get(message)
  if (out === undefined) {
    const text = (notices?.[notice.event] ?? DEFAULT_NOTICES[notice.event])?.(notice.data)
    out = text === undefined ? null : { role: 'user', blocks: [{ type: 'text', text }], seq: message.seq }
    phrased.set(message, out)
    onPhrased?.()
  }
  return out
}

/**
 * The context with each notice message phrased by {@link phraseNotice}; a
 * notice no phrasing reads is left out. It maps every message: a renderer
 * kept across steps takes `phraseNotice` as its `rewrite` instead, which
 * costs a step its new messages.
 */
export function phraseNotices(context: SessionContext, cache: PhrasedNotices, notices: Notices | undefined): SessionContext {
  const messages: ContextMessage[] = []
  for (const message of context.messages) {
    const out = phraseNotice(message, cache, notices)
    if (out !== null) messages.push(out)
  }
  return { ...context, messages }
}
