import { flatten } from './messages.js'
import { isObject } from './read.js'
import type { ContextBlock, ContextMessage, SessionContext, SessionContextState } from './types.js'

/** What the model reads for a call the log shows no result for (the turn ended before the tool returned). */
export const MISSING_RESULT_TEXT = 'Error TOOL_NO_RESULT: the turn ended before this tool returned; its effect is unknown.'

function callIdsOf(message: ContextMessage): string[] {
  if (message.role !== 'assistant') return []
  const ids: string[] = []
  for (const block of message.blocks) if (block.type === 'tool-call' && typeof block.id === 'string') ids.push(block.id)
  return ids
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
 * The model-visible context of a state: its messages (the streamed step
 * still open included) with every tool call followed by exactly one result,
 * in call order, right after the message holding the calls. A call without
 * a result gets a synthetic error result; a result whose call is not in the
 * context (compacted away, or never made) is left out. Both are counted.
 * O(messages); pure.
 */
export function contextView(state: SessionContextState): SessionContext {
  const messages = flatten(state.chunks)
  const open = state.open
  if (open !== null) {
    const blocks: ContextBlock[] = []
    if (open.reasoning.length > 0) blocks.push({ type: 'reasoning', text: open.reasoning })
    if (open.text.length > 0) blocks.push({ type: 'text', text: open.text })
    blocks.push(...open.calls)
    if (blocks.length > 0) messages.push({ role: 'assistant', blocks, seq: open.seq })
  }
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
  return {
    messages: out,
    step: state.step,
    provider: state.provider,
    model: state.model,
    compaction: state.compaction,
    compacting: state.compactions.length > 0,
    seq: state.seq,
    warnings: { ...state.warnings, 'orphan-result': tools - paired, 'missing-result': missing },
  }
}
