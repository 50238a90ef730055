import type { AttachmentRef, Session } from '@dsh/session'
import {
  type AttachmentResolver,
  applyContextEvent,
  type ChatMessage,
  type ChatRequest,
  type ContextMessage,
  chatRenderer,
  contextView,
  type IncrementalRenderer,
  type PreviousResponse,
  type ResponsesItem,
  responsesRenderer,
  type SessionContext,
  type SessionContextService,
  type SessionContextState,
  sessionContextUnit,
} from '@dsh/session-context'
import { type ChainTarget, previousResponseOf } from './chain.js'
import { type Notices, phraseNotices } from './notices.js'

/** Where the driver takes a session's context from: the `sessionContext` service, or a getter for it (a host made after the driver). */
export type ContextSource = SessionContextService | (() => SessionContextService | undefined)

/**
 * The attachment bytes of one session, read through its persistence
 * (`attachmentResolver` of `@dsh/session-persistence` has this shape):
 * `load` reads the attachments the messages reference that it has not read
 * yet, `resolve` is the renderer's synchronous lookup.
 */
export interface SessionAttachments {
  readonly resolve: AttachmentResolver
  load(messages: Iterable<{ readonly blocks: readonly unknown[] }>, signal?: AbortSignal): Promise<number>
}

/** Where a session's attachment bytes come from: one `SessionAttachments` per session, made on first use. */
export type AttachmentSource = (session: Session) => SessionAttachments

/** What the driver keeps per session between steps and turns. */
interface SessionRequests {
  /** The Chat renderer: each step renders only the messages that changed since the previous one. */
  readonly renderer: IncrementalRenderer<ChatRequest>
  /** The Responses renderer, made on the session's first Responses request. */
  responses: ReturnType<typeof responsesRenderer> | undefined
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

function requestsOf(session: Session): SessionRequests {
  let kept = perSession.get(session)
  if (kept === undefined) {
    // The renderers read attachment bytes through the session's loaded set (none without a source).
    const attachments = (ref: AttachmentRef) => perSession.get(session)?.attachments?.resolve(ref)
    // reasoning_content goes back on tool-calling messages: DeepSeek's thinking mode requires it there.
    kept = {
      renderer: chatRenderer({ reasoningContent: true, model: '', attachments }),
      responses: undefined,
      attachments: undefined,
      loaded: new WeakSet(),
      phrased: new WeakMap(),
      fold: undefined,
    }
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

/** What every request builder takes. */
export interface RequestOptions {
  readonly context?: ContextSource
  readonly notices?: Notices
  readonly system?: string
  /** Where attachment bytes come from; without it an image or file renders as a note that it is missing. */
  readonly attachments?: AttachmentSource
  readonly signal?: AbortSignal
}

/**
 * The session's context with notices phrased, after loading the bytes of
 * the attachments its new messages reference: the messages from the end
 * back to the newest one loaded before (a step costs its new messages).
 */
async function preparedContext(session: Session, kept: SessionRequests, options: RequestOptions): Promise<SessionContext> {
  const context = await contextOf(session, kept, options.context)
  if (options.attachments !== undefined) {
    kept.attachments ??= options.attachments(session)
    const fresh: ContextMessage[] = []
    for (let i = context.messages.length - 1; i >= 0; i--) {
      const message = context.messages[i] as ContextMessage
      if (kept.loaded.has(message)) break
      fresh.push(message)
    }
    await kept.attachments.load(fresh, options.signal)
    for (const message of fresh) kept.loaded.add(message)
  }
  return phraseNotices(context, kept.phrased, options.notices)
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
export async function requestMessages(session: Session, options: RequestOptions): Promise<ChatMessage[]> {
  const kept = requestsOf(session)
  const { body } = kept.renderer.render(await preparedContext(session, kept, options))
  if (options.system === undefined || options.system.length === 0) return body.messages
  return withSystem(options.system, body.messages)
}

/** A Responses request's context part: the input items and the response they continue. */
export interface ResponsesRequestInput {
  readonly input: ResponsesItem[]
  /** The response continued; absent when this request starts a new chain. */
  readonly previous: PreviousResponse | undefined
}

/**
 * The input of the session's next Responses request, built from its
 * `sessionContext` with the session's incremental Responses renderer. When
 * the session's newest step is a Responses response on `target`'s provider
 * and model (`previousResponseOf`) and no compaction came after it, only the
 * context messages after that step's `step/end` are rendered and sent, with
 * its id as `previous_response_id`; otherwise the whole context goes out
 * and a new chain starts. The system prompt is the request's
 * `instructions`, not an input item (the API does not carry instructions
 * over from a previous response).
 */
export async function requestInput(session: Session, target: ChainTarget, options: RequestOptions): Promise<ResponsesRequestInput> {
  const kept = requestsOf(session)
  const context = await preparedContext(session, kept, options)
  kept.responses ??= responsesRenderer({
    model: '',
    attachments: (ref) => kept.attachments?.resolve(ref),
  })
  let previous = previousResponseOf(session, target)
  if (previous !== undefined && context.compaction !== null && context.compaction.seq > previous.throughSeq) previous = undefined
  const { body } = kept.responses.render(context, previous)
  return { input: body.input, previous: body.previous_response_id === undefined ? undefined : previous }
}
