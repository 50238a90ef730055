import type { ToolCallBlock } from '@dsh/session'
import type { OpenAssistant } from './types.js'

/** Where an open step built by {@link withCall} keeps its calls: the first `length` entries of `buffer`. */
type SharedCalls = { readonly buffer: ToolCallBlock[]; readonly length: number }

/**
 * The calls of the open steps {@link withCall} built. States are never
 * mutated and an older state may be folded on (the service's memo, a
 * snapshot a caller kept), so each step needs its own list of calls; copying
 * the list at every `tool/call` event would cost the step's calls per call.
 * The steps of one stream share an append-only buffer instead, each knowing
 * its length; a step's `calls` array is built from the buffer when first
 * read (a view, a commit, a checkpoint's JSON) and then kept. Appending to a
 * step that is not the buffer's end (an older state folded on again), or to
 * one without a buffer (a revived checkpoint, a copy), copies its calls into
 * a new buffer first.
 */
const shared = new WeakMap<OpenAssistant, SharedCalls>()

/** How many calls the open step holds, without building its `calls` array. */
export function callCount(open: OpenAssistant): number {
  return shared.get(open)?.length ?? open.calls.length
}

/**
 * The open step with `call` appended: amortized O(1) along a stream. Its
 * `calls` is an enumerable accessor returning the same plain array at every
 * read, so the step reads, serializes and compares as the plain JSON object
 * `{ seq, from?, text, reasoning, calls }`.
 */
export function withCall(open: OpenAssistant, call: ToolCallBlock): OpenAssistant {
  const own = shared.get(open)
  let buffer: ToolCallBlock[]
  if (own === undefined) buffer = Array.from(open.calls)
  else if (own.buffer.length === own.length) buffer = own.buffer
  else buffer = own.buffer.slice(0, own.length)
  buffer.push(call)
  const length = buffer.length
  let calls: readonly ToolCallBlock[] | undefined
  const next: OpenAssistant = {
    seq: open.seq,
    ...(open.from === undefined ? {} : { from: open.from }),
    text: open.text,
    reasoning: open.reasoning,
    get calls(): readonly ToolCallBlock[] {
      calls ??= buffer.slice(0, length)
      return calls
    },
  }
  shared.set(next, { buffer, length })
  return next
}
