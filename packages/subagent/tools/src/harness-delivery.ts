import type { JsonValue, Session } from '@dsh/session'
import { MAX_WAIT_MS, SUBAGENT_NOTICE_EVENT, type SubagentEndReason, type SubagentNotice } from '@dsh/subagent'
import type { SubagentControl } from './tool.js'

const ENDINGS: Record<SubagentEndReason, string> = {
  completed: 'has finished; it does nothing more until you send_message it',
  cancelled: 'was stopped before it finished',
  interrupted: 'was stopped before it finished',
  error: 'failed before it finished',
  drained: 'was stopped because the session that started it went away',
  'invalid-output': 'ended with an answer that did not match its schema',
  closed: 'was closed',
  budget: 'was stopped because it used up its budget',
}

/** What a settlement notice says of a child that waits for subagents of its own. */
const WAITING =
  'Subagents it started are still working: it takes another turn each time one of them finishes, and you get a notice after each.'

/**
 * A child's notice as a model prompted for the harness reads it, or
 * `undefined` for one it should not see: a background (continuable) child's
 * settlement says how it ended (and, when it waits for subagents of its own,
 * that more turns follow) and carries its last message; a report carries the
 * child's words, named as the child was started (a background subagent, or
 * one its parent waits for). A one-shot child's settlement is left out: its
 * parent waited for it and already has its answer as the tool result.
 */
export function harnessNoticeText(notice: SubagentNotice): string | undefined {
  if (notice.kind === 'report')
    return `${notice.mode === 'continuable' ? 'Background subagent' : 'Subagent'} ${notice.child} reports:\n${notice.text}`
  if (notice.mode !== 'continuable') return undefined
  const ending =
    notice.waiting === true && notice.reason === 'completed'
      ? 'has finished its turn'
      : (ENDINGS[notice.reason] ?? `ended '${String(notice.reason)}'`)
  const lines = [`Background subagent ${notice.child} ${ending}.`]
  if (notice.waiting === true) lines.push(WAITING)
  if (notice.error !== undefined) lines.push(`Error: ${notice.error}`)
  lines.push(notice.text === undefined ? 'It left no final message.' : `Its last message:\n${notice.text}`)
  return lines.join('\n')
}

function isNotice(data: JsonValue): data is JsonValue & SubagentNotice {
  if (data === null || typeof data !== 'object' || Array.isArray(data)) return false
  const { kind, child } = data as Record<string, JsonValue>
  return (kind === 'report' || kind === 'settled') && typeof child === 'string'
}

/**
 * Notice renderers keyed by event type, in the shape a driver takes them
 * (`createOpenAIDriver({ notices })`, `runAgent({ notices })`): the harness
 * phrasing of `subagent/notice`.
 */
export const harnessNotices: Readonly<Record<string, (data: JsonValue) => string | undefined>> = Object.freeze({
  [SUBAGENT_NOTICE_EVENT]: (data: JsonValue) => (isNotice(data) ? harnessNoticeText(data) : undefined),
})

/**
 * Waits, as `parent`, until one of its busy children settles: resolves
 * `true` when one did (its notice is then on `parent`'s log), `false` when
 * none is busy. A child waiting for subagents of its own (`isWaiting`) is
 * busy: their settlements wake it, and it settles again. How a caller that
 * drives a top-level agent turn by turn gives it the harness's wake-up: run
 * another turn after `true`. Rejects with `CANCELLED` when `signal` aborts.
 */
export async function waitForChildSettlement(
  control: Pick<SubagentControl, 'explainChildren' | 'isRunning' | 'wait'> & { isWaiting?(id: string): boolean },
  parent: Session,
  signal?: AbortSignal,
): Promise<boolean> {
  for (;;) {
    const explained = await control.explainChildren(parent.id, signal)
    const busy = (id: string): boolean => control.isRunning(id) || control.isWaiting?.(id) === true
    const running = explained.flatMap(({ row }) => (row.kind === 'child' && busy(row.id) ? [row.id] : []))
    if (running.length === 0) return false
    // One wait per child, raced: the first to settle wins and the others are called off.
    const stop = new AbortController()
    const onAbort = (): void => stop.abort()
    signal?.addEventListener('abort', onAbort, { once: true })
    if (signal?.aborted === true) stop.abort()
    try {
      const waits = running.map((id) => control.wait([id], { caller: parent, timeoutMs: MAX_WAIT_MS, signal: stop.signal }))
      for (const wait of waits) wait.catch(() => {})
      const [entry] = await Promise.race(waits)
      if (entry !== undefined && entry.state !== 'running') return true
    } finally {
      signal?.removeEventListener('abort', onAbort)
      stop.abort()
    }
  }
}
