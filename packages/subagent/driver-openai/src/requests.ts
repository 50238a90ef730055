import type { Session } from '@dsh/session'
import {
  applyContextEvent,
  type ChatMessage,
  type ChatRequest,
  type ContextMessage,
  chatRenderer,
  contextView,
  type IncrementalRenderer,
  type SessionContext,
  type SessionContextService,
  type SessionContextState,
  sessionContextUnit,
} from '@dsh/session-context'
import { type Notices, phraseNotices } from './notices.js'

/** Where the driver takes a session's context from: the `sessionContext` service, or a getter for it (a host made after the driver). */
export type ContextSource = SessionContextService | (() => SessionContextService | undefined)

/** What the driver keeps per session between steps and turns. */
interface SessionRequests {
  /** The Chat renderer: each step renders only the messages that changed since the previous one. */
  readonly renderer: IncrementalRenderer<ChatRequest>
  /** Phrased notice messages by notice table and context message (the same message stays the same object, so the renderer reuses it). */
  readonly phrased: WeakMap<Notices, WeakMap<ContextMessage, ContextMessage | null>>
  /** The driver's own fold of the unit when no `sessionContext` service is reachable: the state and the next event to fold. */
  fold: { readonly state: SessionContextState; readonly next: number } | undefined
}

const perSession = new WeakMap<Session, SessionRequests>()

function requestsOf(session: Session): SessionRequests {
  let kept = perSession.get(session)
  if (kept === undefined) {
    // reasoning_content goes back on tool-calling messages: DeepSeek's thinking mode requires it there.
    kept = { renderer: chatRenderer({ reasoningContent: true, model: '' }), phrased: new WeakMap(), fold: undefined }
    perSession.set(session, kept)
  }
  return kept
}

/**
 * The session's context: from the `sessionContext` service when one is
 * reachable (a live session costs the events since its last fold), else from
 * the driver's own fold of the same unit, kept per session and continued
 * from the next event it has not folded.
 */
async function contextOf(session: Session, kept: SessionRequests, source: ContextSource | undefined): Promise<SessionContext> {
  const service = typeof source === 'function' ? source() : source
  if (service !== undefined) return service.contextOf(session)
  const events = session.events
  const from = kept.fold !== undefined && kept.fold.next <= events.length ? kept.fold : { state: sessionContextUnit.init(), next: 0 }
  let state = from.state
  for (let i = from.next; i < events.length; i++) state = applyContextEvent(state, events[i] as (typeof events)[number])
  kept.fold = { state, next: events.length }
  return contextView(state)
}

/** The system message, then `messages` (one allocation of the final size: the list is as long as the transcript). */
function withSystem(system: string, messages: readonly ChatMessage[]): ChatMessage[] {
  const out = new Array<ChatMessage>(messages.length + 1)
  out[0] = { role: 'system', content: system }
  for (let i = 0; i < messages.length; i++) out[i + 1] = messages[i] as ChatMessage
  return out
}

/**
 * The Chat Completions messages of the session's next request, built from
 * its `sessionContext` (never from the log): the system prompt, then the
 * context rendered by the session's incremental Chat renderer, with each
 * notice phrased by `notices` (a notice its phrasing leaves out is not sent).
 * A step costs the events since the previous one to fold and the changed
 * messages to render, plus one pass over the message list that compares
 * references.
 */
export async function requestMessages(
  session: Session,
  options: { readonly context?: ContextSource; readonly notices?: Notices; readonly system?: string },
): Promise<ChatMessage[]> {
  const kept = requestsOf(session)
  const context = await contextOf(session, kept, options.context)
  const phrased = phraseNotices(context, kept.phrased, options.notices)
  const { body } = kept.renderer.render(phrased)
  if (options.system === undefined || options.system.length === 0) return body.messages
  return withSystem(options.system, body.messages)
}
