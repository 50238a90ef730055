import { isNoticeAfter } from './draft.js'
import { flatten, popMessage } from './messages.js'
import { isObject } from './read.js'
import type { ContextBlock, ContextMessage, SessionContext, SessionContextState } from './types.js'

/** What the model reads for a call the log shows no result for (the turn ended before the tool returned). */
export const MISSING_RESULT_TEXT = 'Error TOOL_NO_RESULT: the turn ended before this tool returned; its effect is unknown.'

const NO_IDS: readonly string[] = []

/** Per message holding calls (messages are immutable and shared by every later state): its call ids. */
const callIds = new WeakMap<ContextMessage, readonly string[]>()

function callIdsOf(message: ContextMessage): readonly string[] {
  if (message.role !== 'assistant') return NO_IDS
  const ids = callIds.get(message)
  if (ids !== undefined) return ids
  const out: string[] = []
  for (const block of message.blocks) if (block.type === 'tool-call' && typeof block.id === 'string') out.push(block.id)
  if (out.length === 0) return NO_IDS
  callIds.set(message, out)
  return out
}

function resultCallId(message: ContextMessage): string | undefined {
  const block = message.blocks[0] as ContextBlock | undefined
  return isObject(block) && block.type === 'tool-result' && typeof block.callId === 'string' ? block.callId : undefined
}

function missingResult(callId: string, seq: number): ContextMessage {
  return {
    role: 'tool',
    blocks: [{ type: 'tool-result', callId, content: [{ type: 'text', text: MISSING_RESULT_TEXT }], isError: true }],
    seq,
    synthetic: true,
  }
}

/**
 * The calls still waiting for their results where a walk stands: in view
 * order only the newest non-tool message (`owner`) can have calls waiting,
 * and they are its calls from the `from`-th on, answered in order.
 */
type Pending = { readonly owner: ContextMessage | null; readonly from: number }

const NONE_PENDING: Pending = { owner: null, from: 0 }

/** How a chunk's walk from `pendingIn` ended: the calls still waiting; `null`: the chunk is not in view order. */
type ChunkWalk = { readonly pendingIn: Pending; readonly pendingOut: Pending | null }

/** Per chunk (chunks are immutable and shared by every later state): its walk from the pending calls it was last walked with. */
const walks = new WeakMap<readonly ContextMessage[], ChunkWalk>()

/**
 * Walks a chunk from `pendingIn` (calls of an earlier message still waiting
 * for results): the chunk is in view order when each tool message is the
 * result of the next waiting call and no other message comes while calls
 * wait. O(the chunk's messages and the calls they hold).
 */
function walkChunk(chunk: readonly ContextMessage[], pendingIn: Pending): ChunkWalk {
  let owner = pendingIn.owner
  let ids = owner === null ? NO_IDS : callIdsOf(owner)
  let from = pendingIn.from
  for (const message of chunk) {
    if (message.role === 'tool') {
      if (from >= ids.length || resultCallId(message) !== ids[from]) return { pendingIn, pendingOut: null }
      from++
      continue
    }
    if (from < ids.length) return { pendingIn, pendingOut: null }
    owner = message
    ids = callIdsOf(message)
    from = 0
  }
  return { pendingIn, pendingOut: from < ids.length ? { owner, from } : NONE_PENDING }
}

/**
 * Whether the committed messages are already in view order (every result
 * right after its call, in call order, none missing before the next message,
 * none orphaned) — the common case, and the view the general pairing would
 * give — and if so how many there are and which calls still wait. Each chunk
 * is checked once (cached by reference), so a step costs its new chunk and
 * one lookup per chunk. `undefined` when some chunk is not in view order.
 */
function orderedChunks(chunks: SessionContextState['chunks']): { total: number; pending: Pending } | undefined {
  let pending = NONE_PENDING
  let total = 0
  for (const chunk of chunks) {
    let walk = walks.get(chunk)
    if (walk === undefined || walk.pendingIn.owner !== pending.owner || walk.pendingIn.from !== pending.from) {
      walk = walkChunk(chunk, pending)
      walks.set(chunk, walk)
    }
    if (walk.pendingOut === null) return undefined
    pending = walk.pendingOut
    total += chunk.length
  }
  return { total, pending }
}

/**
 * How a view's messages lie when the log has them in view order: the
 * state's committed chunks as they are, then a short tail (synthetic results
 * for calls still waiting, the open step and its synthetic results).
 * Renderers read it to find what changed since their previous render by
 * comparing chunk references, without the flat message list.
 */
export interface ViewLayout {
  readonly chunks: SessionContextState['chunks']
  /** Messages in `chunks`. */
  readonly committed: number
  readonly tail: readonly ContextMessage[]
}

const layouts = new WeakMap<SessionContext, ViewLayout>()

/** The layout of a view `contextView` built in view order; `undefined` for any other context (read its `messages`). */
export function viewLayout(context: SessionContext): ViewLayout | undefined {
  return layouts.get(context)
}

/**
 * The committed messages and the notices at their end that landed during
 * the open step (`pushStep` puts them after the step once it commits; the
 * view reads them after the open step already).
 */
function heldByOpen(state: SessionContextState): { chunks: SessionContextState['chunks']; held: ContextMessage[] } {
  const open = state.open
  let chunks = state.chunks
  const held: ContextMessage[] = []
  if (open === null) return { chunks, held }
  const from = open.from ?? open.seq
  for (let last = chunks.at(-1)?.at(-1); isNoticeAfter(last, from); last = chunks.at(-1)?.at(-1)) {
    held.unshift(last)
    chunks = popMessage(chunks)
  }
  return { chunks, held }
}

function openMessage(state: SessionContextState): ContextMessage | undefined {
  const open = state.open
  if (open === null) return undefined
  const blocks: ContextBlock[] = []
  if (open.reasoning.length > 0) blocks.push({ type: 'reasoning', text: open.reasoning })
  if (open.text.length > 0) blocks.push({ type: 'text', text: open.text })
  // One push per call: spreading a step of many calls into `push` overflows the stack.
  for (const call of open.calls) blocks.push(call)
  return blocks.length > 0 ? { role: 'assistant', blocks, seq: open.seq } : undefined
}

function viewOf(state: SessionContextState, messages: readonly ContextMessage[], orphans: number, missing: number): SessionContext {
  return {
    messages,
    ...viewFields(state, orphans, missing),
  }
}

function viewFields(state: SessionContextState, orphans: number, missing: number): Omit<SessionContext, 'messages'> {
  return {
    step: state.step,
    provider: state.provider,
    model: state.model,
    compaction: state.compaction,
    compacting: state.compactions.length > 0,
    seq: state.seq,
    warnings: { ...state.warnings, 'orphan-result': orphans, 'missing-result': missing },
  }
}

/**
 * A view in view order whose `messages` list is built on first read (then
 * kept): the chunks copied into one array of the final size, then the tail.
 * A caller that only renders it through an incremental renderer never pays
 * for the list.
 */
function layoutView(state: SessionContextState, layout: ViewLayout, missing: number): SessionContext {
  let messages: ContextMessage[] | undefined
  const view: SessionContext = {
    get messages(): readonly ContextMessage[] {
      if (messages === undefined) {
        // One allocation of the final size: a transcript-sized array grown by pushes is copied at every growth.
        const out = new Array<ContextMessage>(layout.committed + layout.tail.length)
        let at = 0
        for (const chunk of layout.chunks) for (const message of chunk) out[at++] = message
        for (const message of layout.tail) out[at++] = message
        messages = out
      }
      return messages
    },
    ...viewFields(state, 0, missing),
  }
  layouts.set(view, layout)
  return view
}

/**
 * The model-visible context of a state: its messages (the streamed step
 * still open included) with every tool call followed by exactly one result,
 * in call order, right after the message holding the calls. A call without
 * a result gets a synthetic error result; a result whose call is not in the
 * context (compacted away, or never made) is left out. Both are counted.
 * Pure. When the log already has its messages in view order (the common
 * case) the view costs one lookup per chunk of messages plus the open step,
 * and its `messages` list is built on first read; otherwise O(messages).
 */
export function contextView(state: SessionContextState): SessionContext {
  const open = openMessage(state)
  const { chunks, held } = heldByOpen(state)
  const ordered = orderedChunks(chunks)
  if (ordered !== undefined) {
    // In view order already: only the calls left waiting (a crash, the open step) get synthetic results.
    const tail: ContextMessage[] = []
    const answer = (message: ContextMessage, from: number): void => {
      const ids = callIdsOf(message)
      for (let i = from; i < ids.length; i++) tail.push(missingResult(ids[i] as string, message.seq))
    }
    if (ordered.pending.owner !== null) answer(ordered.pending.owner, ordered.pending.from)
    if (open !== undefined) {
      tail.push(open)
      answer(open, 0)
    }
    for (const notice of held) tail.push(notice)
    const missing = tail.reduce((n, message) => n + (message.synthetic === true ? 1 : 0), 0)
    return layoutView(state, { chunks, committed: ordered.total, tail }, missing)
  }
  const messages = flatten(chunks)
  if (open !== undefined) messages.push(open)
  for (const notice of held) messages.push(notice)
  // Results by call id, in log order: each call takes the first one not yet taken.
  const results = new Map<string, ContextMessage[]>()
  for (const message of messages) {
    if (message.role !== 'tool') continue
    const id = resultCallId(message)
    if (id === undefined) continue
    const queue = results.get(id)
    if (queue === undefined) results.set(id, [message])
    else queue.push(message)
  }
  const out: ContextMessage[] = []
  let missing = 0
  let paired = 0
  for (const message of messages) {
    if (message.role === 'tool') continue
    out.push(message)
    for (const id of callIdsOf(message)) {
      const result = results.get(id)?.shift()
      if (result === undefined) {
        missing++
        out.push(missingResult(id, message.seq))
      } else {
        paired++
        out.push(result)
      }
    }
  }
  const tools = messages.reduce((n, message) => n + (message.role === 'tool' ? 1 : 0), 0)
  return viewOf(state, out, tools - paired, missing)
}
