import type { AttachmentRef, Session } from '@dsh/session'
import {
  type AttachmentResolver,
  applyContextEvent,
  type ChatMessage,
  type ChatRenderOptions,
  type ChatRequest,
  type ContextMessage,
  chatRenderer,
  contextView,
  type IncrementalRenderer,
  type PreviousResponse,
  type RenderStats,
  type ResponsesItem,
  responsesRenderer,
  type SessionContext,
  type SessionContextService,
  type SessionContextState,
  sessionContextUnit,
} from '@dsh/session-context'
import { type ChainTarget, previousResponseOf } from './chain.js'
import { type Notices, type PhrasedNotices, phraseNotice } from './notices.js'

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

/** A renderer kept for one system prompt and notice table (another of either makes a new one). */
interface Kept<R> {
  readonly system: string
  readonly notices: Notices | undefined
  readonly renderer: R
}

/** What the driver keeps per session between steps and turns. */
interface SessionRequests {
  /** The Chat renderer: each step renders only the messages that changed since the previous one, its system prompt first in its kept list. */
  chat: Kept<IncrementalRenderer<ChatRequest>> | undefined
  /** The Responses renderer, made on the session's first Responses request. */
  responses: Kept<ReturnType<typeof responsesRenderer>> | undefined
  /** The session's attachment bytes, when the driver has a source for them. */
  attachments: SessionAttachments | undefined
  /** Context messages whose attachments were loaded (a step loads only the messages after the newest of them). */
  readonly loaded: WeakSet<ContextMessage>
  /** Phrased notice messages by notice table and context message (the same message stays the same object). */
  readonly phrased: PhrasedNotices
  /** The driver's own fold of the unit when no `sessionContext` service is reachable: the state and the next event to fold. */
  fold: { readonly state: SessionContextState; readonly next: number } | undefined
  /** Work counted for {@link requestStats}. */
  readonly counts: { phrased: number; checked: number }
}

/** What building a session's requests has cost so far, in counts (the `testing` entry exports it for the benchmark and tests). */
export interface RequestStats {
  /** The kept Chat renderer's counts (zeros before the first Chat request; a new system prompt or notice table starts a new renderer). */
  readonly chat: RenderStats
  /** The kept Responses renderer's counts, likewise. */
  readonly responses: RenderStats
  /** Notice messages phrased (each once per notice table, when it is first rendered). */
  readonly phrased: number
  /** Context messages looked at for attachments to load (each step: its new messages, then the newest already loaded). */
  readonly attachmentChecks: number
}

const NO_RENDERS: RenderStats = { rendered: 0, reused: 0, rebuilds: 0, compared: 0 }

const perSession = new WeakMap<Session, SessionRequests>()

function requestsOf(session: Session): SessionRequests {
  let kept = perSession.get(session)
  if (kept === undefined) {
    kept = {
      chat: undefined,
      responses: undefined,
      attachments: undefined,
      loaded: new WeakSet(),
      phrased: new WeakMap(),
      fold: undefined,
      counts: { phrased: 0, checked: 0 },
    }
    perSession.set(session, kept)
  }
  return kept
}

/** The counts of the session's request building so far. */
export function requestStats(session: Session): RequestStats {
  const kept = perSession.get(session)
  return {
    chat: kept?.chat?.renderer.stats ?? NO_RENDERS,
    responses: kept?.responses?.renderer.stats ?? NO_RENDERS,
    phrased: kept?.counts.phrased ?? 0,
    attachmentChecks: kept?.counts.checked ?? 0,
  }
}

/** What a kept renderer is made with: the session's attachment bytes (none without a source) and its notices phrased per rendered message. */
function renderOptions(kept: SessionRequests, notices: Notices | undefined): Pick<ChatRenderOptions, 'model' | 'attachments' | 'rewrite'> {
  const counted = (): void => {
    kept.counts.phrased++
  }
  return {
    model: '',
    attachments: (ref: AttachmentRef) => kept.attachments?.resolve(ref),
    rewrite: (message) => phraseNotice(message, kept.phrased, notices, counted),
  }
}

/** The session's Chat renderer for `options`' system prompt and notices (kept across steps and turns). */
function chatOf(kept: SessionRequests, options: RequestOptions): IncrementalRenderer<ChatRequest> {
  const system = options.system ?? ''
  if (kept.chat === undefined || kept.chat.system !== system || kept.chat.notices !== options.notices) {
    // reasoning_content goes back on tool-calling messages: DeepSeek's thinking mode requires it there.
    const renderer = chatRenderer({ ...renderOptions(kept, options.notices), reasoningContent: true, system })
    kept.chat = { system, notices: options.notices, renderer }
  }
  return kept.chat.renderer
}

/**
 * The session's context state: from the `sessionContext` service when one
 * is reachable (a live session costs the events since its last fold), else
 * from the driver's own fold of the same unit, kept per session and
 * continued from the next event it has not folded.
 */
async function stateOf(session: Session, kept: SessionRequests, source: ContextSource | undefined): Promise<SessionContextState> {
  const service = typeof source === 'function' ? source() : source
  if (service !== undefined) return service.stateOf(session)
  const events = session.events
  const from = kept.fold !== undefined && kept.fold.next <= events.length ? kept.fold : { state: sessionContextUnit.init(), next: 0 }
  let state = from.state
  for (let i = from.next; i < events.length; i++) state = applyContextEvent(state, events[i] as (typeof events)[number])
  kept.fold = { state, next: events.length }
  return state
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
 * The session's context, after loading the bytes of the attachments its new
 * messages reference: the committed messages from the end back to the newest
 * one loaded before, read from the state's chunks (a step costs its new
 * messages; the rest of a view holds no attachments: synthetic results and
 * the open step). Notices are phrased by the renderers, per rendered message.
 */
async function preparedContext(session: Session, kept: SessionRequests, options: RequestOptions): Promise<SessionContext> {
  const state = await stateOf(session, kept, options.context)
  if (options.attachments !== undefined) {
    kept.attachments ??= options.attachments(session)
    const fresh: ContextMessage[] = []
    walk: for (let c = state.chunks.length - 1; c >= 0; c--) {
      const chunk = state.chunks[c] as readonly ContextMessage[]
      for (let m = chunk.length - 1; m >= 0; m--) {
        const message = chunk[m] as ContextMessage
        kept.counts.checked++
        if (kept.loaded.has(message)) break walk
        fresh.push(message)
      }
    }
    await kept.attachments.load(fresh, options.signal)
    for (const message of fresh) kept.loaded.add(message)
  }
  return contextView(state)
}

/**
 * The Chat Completions messages of the session's next request, built from
 * its `sessionContext` (never from the log) by the session's incremental
 * Chat renderer: the system prompt, then the context, each notice phrased by
 * `notices` (a notice its phrasing leaves out is not sent). A step costs the
 * events since the previous one to fold, one reference compare per chunk of
 * 64 messages, and its changed messages to phrase and render. The list is
 * the renderer's own, valid until the session's next request.
 */
export async function requestMessages(session: Session, options: RequestOptions): Promise<ChatMessage[]> {
  const kept = requestsOf(session)
  const context = await preparedContext(session, kept, options)
  return chatOf(kept, options).render(context).body.messages
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
  if (kept.responses === undefined || kept.responses.notices !== options.notices) {
    kept.responses = { system: '', notices: options.notices, renderer: responsesRenderer(renderOptions(kept, options.notices)) }
  }
  let previous = previousResponseOf(session, target)
  if (previous !== undefined && context.compaction !== null && context.compaction.seq > previous.throughSeq) previous = undefined
  const { body } = kept.responses.renderer.render(context, previous)
  return { input: body.input, previous: body.previous_response_id === undefined ? undefined : previous }
}
