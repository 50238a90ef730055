import { type JsonValue, STEP_FINISHES, type StepFinish, type StoredSessionEvent, type TokenUsage, type ToolCallBlock } from '@dsh/session'
import { attribution, commitOpen, counted, type Draft, NOTICE_BLOCK, newCounts, newOpen, push, pushStep, stepFrom, warn } from './draft.js'
import { callCount, withCall } from './open.js'
import { isObject, type Json, type ReadCounts, readBlocks, resultContent, toolCallOf, toolOutcomeText } from './read.js'
import type { ContextBlock, OpenAssistant } from './types.js'

/** The open step, continued by streamed output: output after calls starts a new step. */
function openFor(next: Draft, seq: number): OpenAssistant {
  if (next.open !== null && callCount(next.open) > 0) commitOpen(next)
  return next.open ?? newOpen(next, seq)
}

function residual(data: Json): Json | undefined {
  return isObject(data.v0) ? data.v0 : undefined
}

/**
 * An imported harness message that replaced surface nodes (`surfaceOp
 * {op: 'replace'}`): the node a harness compaction or prune writes right
 * after its `compaction/summary` or `compaction/prune`. The fold applies
 * those events themselves, so the replacing node is not a message of its own.
 */
function isReplacement(data: Json): boolean {
  const op = residual(data)?.surfaceOp
  return isObject(op) && op.op === 'replace'
}

/** Skips harness replacement nodes (see {@link isReplacement}). */
function surface(fold: (next: Draft, event: StoredSessionEvent, data: Json) => void) {
  return (next: Draft, event: StoredSessionEvent, data: Json): void => {
    if (!isReplacement(data)) fold(next, event, data)
  }
}

function userMessage(next: Draft, event: StoredSessionEvent, data: Json): void {
  const counts = newCounts()
  const v0 = residual(data)
  const blocks = readBlocks(data.blocks, counts) ?? (v0 === undefined ? undefined : readBlocks(v0.content, counts))
  if (blocks === undefined && typeof data.text !== 'string') {
    warn(next, 'invalid-event')
    return
  }
  commitOpen(next)
  next.mirrors = []
  counted(next, counts)
  push(next, { role: 'user', blocks: blocks ?? [{ type: 'text', text: data.text as string }], seq: event.seq })
}

/** An imported harness message's blocks: its content with the text put back into the hole the import left. */
function importedBlocks(data: Json, counts: ReadCounts): ContextBlock[] | undefined {
  const v0 = residual(data)
  const message = v0 === undefined ? undefined : v0.message
  if (!isObject(message) || !Array.isArray(message.content)) return undefined
  const at = v0?.textAt
  const content =
    typeof at === 'number' ? message.content.map((block, i) => (i === at ? { type: 'text', text: data.text } : block)) : message.content
  return readBlocks(content, counts)
}

function importedAttribution(data: Json): Json {
  const message = residual(data)?.message
  return isObject(message) && isObject(message.source) ? message.source : data
}

function assistantMessage(next: Draft, event: StoredSessionEvent, data: Json): void {
  const counts = newCounts()
  const own = readBlocks(data.blocks, counts) ?? importedBlocks(data, counts)
  if (own === undefined && typeof data.text !== 'string') {
    warn(next, 'invalid-event')
    return
  }
  const who = importedAttribution(data)
  if (typeof who.provider === 'string') next.provider = who.provider
  if (typeof who.model === 'string') next.model = who.model
  // Calls streamed before the message close their own step; the message supersedes the streamed text.
  // The message is the event's (a harness compaction names message events by their own seq); its step
  // began at the step/start before it, or at the streamed text it supersedes.
  let reasoning = ''
  let from = stepFrom(next, event.seq)
  if (next.open !== null && callCount(next.open) > 0) commitOpen(next)
  else if (next.open !== null) {
    reasoning = next.open.reasoning
    from = Math.min(from, next.open.from ?? next.open.seq)
    next.open = null
  }
  counted(next, counts)
  let blocks: ContextBlock[]
  if (own !== undefined) blocks = own
  else {
    blocks = reasoning.length > 0 ? [{ type: 'reasoning', text: reasoning }] : []
    if ((data.text as string).length > 0) blocks.push({ type: 'text', text: data.text as string })
  }
  next.mirrors = own === undefined ? [] : own.flatMap((block) => (block.type === 'tool-call' ? [(block as ToolCallBlock).id] : []))
  if (blocks.length > 0) pushStep(next, { role: 'assistant', blocks, seq: event.seq, ...attribution(next) }, from)
}

function streamed(next: Draft, event: StoredSessionEvent, data: Json, field: 'text' | 'reasoning'): void {
  if (typeof data.delta !== 'string') {
    warn(next, 'invalid-event')
    return
  }
  const open = openFor(next, event.seq)
  next.open = { ...open, [field]: open[field] + data.delta }
}

/** Per `mirrors` list (shared by every state until the next message replaces it): its ids as a set. */
const mirrorSets = new WeakMap<readonly string[], ReadonlySet<string>>()

/** Whether `callId` is one of `mirrors`: one lookup per `tool/call` event, not a scan of the message's calls. */
function isMirror(mirrors: readonly string[], callId: string): boolean {
  if (mirrors.length === 0) return false
  let set = mirrorSets.get(mirrors)
  if (set === undefined) {
    set = new Set(mirrors)
    mirrorSets.set(mirrors, set)
  }
  return set.has(callId)
}

function toolCall(next: Draft, event: StoredSessionEvent, data: Json): void {
  if (typeof data.callId !== 'string' || typeof data.name !== 'string' || !Object.hasOwn(data, 'arguments')) {
    warn(next, 'invalid-event')
    return
  }
  if (isMirror(next.mirrors, data.callId)) return
  const args = data.arguments as JsonValue
  const call = toolCallOf(data.callId, data.name, typeof args === 'string' ? undefined : args, typeof args === 'string' ? args : undefined)
  if (call === undefined) {
    warn(next, 'invalid-event')
    return
  }
  next.open = withCall(next.open ?? newOpen(next, event.seq), call)
}

function toolResult(next: Draft, event: StoredSessionEvent, data: Json): void {
  if (typeof data.callId !== 'string') {
    warn(next, 'invalid-event')
    return
  }
  const isError = data.isError === true
  const counts = newCounts()
  let content = resultContent(readBlocks(data.blocks, counts), counts)
  // An imported harness result keeps its blocks in `content`.
  if (content === undefined && residual(data) !== undefined) content = resultContent(readBlocks(data.content, counts), counts)
  // `blocks` none of which could be read (each counted) leave the model the tool's outcome, as a result without
  // blocks does, rather than an empty result.
  const unread = content?.length === 0 && Array.isArray(data.blocks) && data.blocks.length > 0
  if (content === undefined || unread) {
    const text = toolOutcomeText(data.content, isError)
    if (text !== undefined) content = [{ type: 'text', text }]
    else if (content === undefined) {
      warn(next, 'invalid-event')
      return
    }
  }
  commitOpen(next)
  counted(next, counts)
  push(next, {
    role: 'tool',
    blocks: [
      isError ? { type: 'tool-result', callId: data.callId, content, isError } : { type: 'tool-result', callId: data.callId, content },
    ],
    seq: event.seq,
  })
}

const COUNT_NAMES = {
  input: ['input', 'inputTokens'],
  output: ['output', 'outputTokens'],
  cacheRead: ['cacheRead', 'cacheReadTokens'],
  cacheWrite: ['cacheWrite', 'cacheWriteTokens'],
  reasoning: ['reasoning', 'reasoningTokens'],
} as const

/** A usage record in dsh's or the harness's names; `null` when it is not one. */
function readUsage(value: unknown): TokenUsage | null {
  if (!isObject(value)) return null
  const harness = Object.hasOwn(value, 'inputTokens') || Object.hasOwn(value, 'outputTokens')
  const out: Record<string, number> = {}
  for (const [kind, names] of Object.entries(COUNT_NAMES)) {
    const name = names[harness ? 1 : 0]
    if (!Object.hasOwn(value, name)) {
      if (kind === 'input' || kind === 'output') return null
      continue
    }
    const n = value[name]
    if (typeof n !== 'number' || !Number.isSafeInteger(n) || n < 0) return null
    out[kind] = n
  }
  return out as TokenUsage
}

function stepStart(next: Draft, event: StoredSessionEvent, data: Json): void {
  const provider = typeof data.provider === 'string' ? data.provider : null
  const model = typeof data.model === 'string' ? data.model : null
  if ((Object.hasOwn(data, 'provider') && provider === null) || (Object.hasOwn(data, 'model') && model === null))
    warn(next, 'invalid-event')
  if (provider !== null) next.provider = provider
  if (model !== null) next.model = model
  next.step = { seq: event.seq, provider, model, ended: false }
}

function stepEnd(next: Draft, event: StoredSessionEvent, data: Json): void {
  const usage = Object.hasOwn(data, 'usage') ? readUsage(data.usage) : null
  const finish = STEP_FINISHES.includes(data.finish as StepFinish) ? (data.finish as StepFinish) : undefined
  if ((Object.hasOwn(data, 'usage') && usage === null) || (Object.hasOwn(data, 'finish') && finish === undefined))
    warn(next, 'invalid-event')
  const step = next.step ?? { seq: event.seq, provider: null, model: null, ended: false }
  next.step = {
    seq: step.seq,
    provider: step.provider,
    model: step.model,
    ended: true,
    ...(usage === null ? {} : { usage }),
    ...(finish === undefined ? {} : { finish }),
  }
}

/**
 * A child's notice to its parent (`subagent/notice`, written by the subagent
 * runtime): a `user` message holding one `notice` block with the event's
 * data, which the driver phrases. One that lands during a step (anywhere
 * from its `step/start` to its end, before its first chunk too) is placed
 * after that step (see `pushStep`); one between a call and its
 * result is read after the result (the view puts results right after
 * their calls).
 */
function notice(next: Draft, event: StoredSessionEvent, data: Json): void {
  push(next, { role: 'user', blocks: [{ type: NOTICE_BLOCK, event: event.type, data: data as JsonValue }], seq: event.seq })
}

/** The fold of each message and step event type: each changes the draft, or counts why it could not. */
export const HANDLERS: Readonly<Record<string, (next: Draft, event: StoredSessionEvent, data: Json) => void>> = {
  'user/message': surface(userMessage),
  'assistant/message': surface(assistantMessage),
  'assistant/chunk': (next, event, data) => streamed(next, event, data, 'text'),
  'assistant/reasoning': (next, event, data) => streamed(next, event, data, 'reasoning'),
  'tool/call': toolCall,
  'tool/result': surface(toolResult),
  'turn/start': () => {},
  'turn/end': (next) => commitOpen(next),
  'step/start': stepStart,
  'step/end': stepEnd,
  'subagent/notice': notice,
}
