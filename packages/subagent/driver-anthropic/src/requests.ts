import type { MessageParam, TextBlockParam } from '@anthropic-ai/sdk/resources/messages'
import { type AttachmentSource, type ContextSource, type Notices, phraseNotices, type SessionAttachments } from '@dsh/driver-openai'
import type { AttachmentRef, Session } from '@dsh/session'
import {
  type AnthropicRequest,
  anthropicRenderer,
  applyContextEvent,
  type ContextMessage,
  contextView,
  type IncrementalRenderer,
  type SessionContext,
  type SessionContextState,
  sessionContextUnit,
} from '@dsh/session-context'

export type { AttachmentSource, ContextSource }

/** What the driver keeps per session between steps and turns. */
interface SessionRequests {
  /** The Anthropic renderer: each step renders only the messages that changed since the previous one. */
  readonly renderer: IncrementalRenderer<AnthropicRequest>
  /** The session's attachment bytes, when the driver has a source for them. */
  attachments: SessionAttachments | undefined
  /** Context messages whose attachments were loaded (a step loads only the messages after the newest of them). */
  readonly loaded: WeakSet<ContextMessage>
  /** Phrased notice messages by notice table and context message (the same message stays the same object, so the renderer reuses it). */
  readonly phrased: WeakMap<Notices, WeakMap<ContextMessage, ContextMessage | null>>
  /** The driver's own fold of the unit when no `sessionContext` service is reachable: the state and the next event to fold. */
  fold: { readonly state: SessionContextState; readonly next: number } | undefined
}

const perSession = new WeakMap<Session, SessionRequests>()

/**
 * The session's context: from the `sessionContext` service when one is
 * reachable, else from the driver's own fold of the same unit, kept per
 * session and continued from the next event it has not folded.
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

export interface RequestOptions {
  readonly context?: ContextSource
  readonly notices?: Notices
  /** The driver's system prompt, sent before the context's own system text. */
  readonly system?: string
  /** Where attachment bytes come from (one reader per session); without it an image or PDF renders as a note that it is missing. */
  readonly attachments?: AttachmentSource
  readonly signal?: AbortSignal
}

/** The system blocks and messages of one Messages request. */
export interface RequestParts {
  readonly system: TextBlockParam[] | undefined
  readonly messages: MessageParam[]
}

/**
 * The `system` and `messages` of the session's next request, built from its
 * `sessionContext` (never from the log) by the session's incremental
 * Anthropic renderer: thinking blocks with their signatures, tool calls and
 * results (`is_error` on a failed one), consecutive messages of one role
 * merged, and `cache_control` breakpoints on the stable prefix — the last
 * system block (which covers the tools before it), the last message before
 * the newest turn, and the last message. The driver's system prompt leads
 * the system blocks (and takes the breakpoint when the context has no
 * system text of its own). Notices are phrased by `notices`; the bytes of
 * images and PDFs the new messages reference are loaded first.
 */
export async function requestParts(session: Session, options: RequestOptions): Promise<RequestParts> {
  let kept = perSession.get(session)
  if (kept === undefined) {
    // The renderer reads attachment bytes through the session's loaded set (none without a source).
    const attachments = (ref: AttachmentRef) => perSession.get(session)?.attachments?.resolve(ref)
    kept = {
      renderer: anthropicRenderer({ model: '', attachments }),
      attachments: undefined,
      loaded: new WeakSet(),
      phrased: new WeakMap(),
      fold: undefined,
    }
    perSession.set(session, kept)
  }
  const context = await contextOf(session, kept, options.context)
  if (options.attachments !== undefined) {
    // The bytes of the attachments the new messages reference: from the end back to the newest message loaded before.
    kept.attachments ??= options.attachments(session)
    const fresh: ContextMessage[] = []
    for (let i = context.messages.length - 1; i >= 0 && !kept.loaded.has(context.messages[i] as ContextMessage); i--)
      fresh.push(context.messages[i] as ContextMessage)
    await kept.attachments.load(fresh, options.signal)
    for (const message of fresh) kept.loaded.add(message)
  }
  const { body } = kept.renderer.render(phraseNotices(context, kept.phrased, options.notices))
  const messages = body.messages as MessageParam[]
  const rendered = body.system ?? []
  if (options.system === undefined || options.system.length === 0) return { system: rendered.length === 0 ? undefined : rendered, messages }
  const own: TextBlockParam =
    rendered.length === 0
      ? { type: 'text', text: options.system, cache_control: { type: 'ephemeral' } }
      : { type: 'text', text: options.system }
  return { system: [own, ...rendered], messages }
}
