import { randomUUID } from 'node:crypto'
import type { RawMessageStreamEvent } from '@anthropic-ai/sdk/resources/messages'
import { loggedArguments, type StepBound } from '@dsh/driver-openai'
import type { ContentBlock } from '@dsh/session'
import { type AnthropicUsage, mergeRawUsage, usageFromMessages } from './usage.js'

/** One tool call as the model streamed it, input fragments joined. */
export interface AnthropicToolCall {
  readonly id: string
  readonly name: string
  /** The raw JSON text of the input (it may be malformed; the tool runner says so to the model). */
  readonly arguments: string
}

/** One model step: what one streamed Messages response said. */
export interface AnthropicStep {
  /** The step's content in the order the model produced it: reasoning (with its signature), text, tool calls. */
  readonly blocks: readonly ContentBlock[]
  /** The text blocks joined. */
  readonly text: string
  readonly toolCalls: readonly AnthropicToolCall[]
  readonly usage: AnthropicUsage | undefined
  readonly stopReason: string | undefined
  /** The message's `id`, when the server sent one. */
  readonly responseId: string | undefined
}

export interface StreamCallbacks {
  /** A text delta arrived. */
  readonly onText: (delta: string) => void
  /** A thinking delta arrived. */
  readonly onThinking: (delta: string) => void
}

type OpenBlock =
  | { kind: 'text'; text: string }
  | { kind: 'thinking'; text: string; signature: string }
  | { kind: 'tool'; id: string; name: string; json: string }
  | { kind: 'other' }

/**
 * Assembles a step from the stream's events: `content_block_start` opens a
 * block at its index, `content_block_delta` extends it (`text_delta`,
 * `thinking_delta`, `signature_delta`, `input_json_delta`), and the usage is
 * `message_start`'s overridden by `message_delta`'s. Block types dsh does
 * not keep (`redacted_thinking`, server tool blocks) are skipped.
 */
export class StepAssembler {
  readonly #blocks: OpenBlock[] = []
  readonly #callbacks: StreamCallbacks
  readonly #bound: StepBound
  #usage: Record<string, unknown> | undefined
  #stopReason: string | undefined
  #responseId: string | undefined
  /** Whether anything was passed to a callback (a retry would then repeat recorded output). */
  emitted = false

  constructor(callbacks: StreamCallbacks, bound: StepBound) {
    this.#callbacks = callbacks
    this.#bound = bound
  }

  /** Whether the server said why the message stopped (`message_delta`'s `stop_reason`): a stream without it was cut off. */
  get finished(): boolean {
    return this.#stopReason !== undefined
  }

  /** The usage the server has reported so far (`message_start`'s, overridden by each `message_delta`'s), or undefined before any. */
  get usage(): AnthropicUsage | undefined {
    return this.#usage === undefined ? undefined : usageFromMessages(this.#usage)
  }

  add(event: RawMessageStreamEvent): void {
    switch (event.type) {
      case 'message_start':
        this.#responseId = typeof event.message.id === 'string' && event.message.id.length > 0 ? event.message.id : undefined
        this.#usage = mergeRawUsage(undefined, event.message.usage)
        break
      case 'message_delta':
        this.#usage = mergeRawUsage(this.#usage, event.usage)
        if (event.delta.stop_reason) this.#stopReason = event.delta.stop_reason
        break
      case 'content_block_start': {
        const block = event.content_block
        // Bounded: a far index would make a sparse array that every later pass over the blocks walks whole.
        const index = this.#bound.part(event.index, 'content block')
        if (block.type === 'tool_use') this.#bound.take(block.name)
        this.#blocks[index] =
          block.type === 'text'
            ? { kind: 'text', text: '' }
            : block.type === 'thinking'
              ? { kind: 'thinking', text: '', signature: '' }
              : block.type === 'tool_use'
                ? { kind: 'tool', id: block.id, name: block.name, json: '' }
                : { kind: 'other' }
        break
      }
      case 'content_block_delta':
        this.#delta(event.index, event.delta)
        break
      default:
        break
    }
  }

  #delta(index: number, delta: Extract<RawMessageStreamEvent, { type: 'content_block_delta' }>['delta']): void {
    const open = this.#blocks[index]
    if (open === undefined) return
    if (delta.type === 'text_delta' && open.kind === 'text' && delta.text.length > 0) {
      this.#bound.take(delta.text)
      open.text += delta.text
      this.emitted = true
      this.#callbacks.onText(delta.text)
    } else if (delta.type === 'thinking_delta' && open.kind === 'thinking' && delta.thinking.length > 0) {
      this.#bound.take(delta.thinking)
      open.text += delta.thinking
      this.emitted = true
      this.#callbacks.onThinking(delta.thinking)
    } else if (delta.type === 'signature_delta' && open.kind === 'thinking') {
      this.#bound.take(delta.signature)
      open.signature += delta.signature
    } else if (delta.type === 'input_json_delta' && open.kind === 'tool') {
      this.#bound.take(delta.partial_json)
      open.json += delta.partial_json
    }
  }

  /** The step as streamed so far. */
  step(): AnthropicStep {
    const blocks: ContentBlock[] = []
    const toolCalls: AnthropicToolCall[] = []
    let text = ''
    for (const open of this.#blocks) {
      if (open === undefined || open.kind === 'other') continue
      if (open.kind === 'text') {
        if (open.text.length === 0) continue
        text += open.text
        blocks.push({ type: 'text', text: open.text })
      } else if (open.kind === 'thinking') {
        // A thinking block without a signature cannot go back to the API; it is kept as plain reasoning.
        blocks.push(
          open.signature.length > 0
            ? { type: 'reasoning', text: open.text, signature: open.signature }
            : { type: 'reasoning', text: open.text },
        )
      } else {
        const id = open.id.length > 0 ? open.id : `toolu_${randomUUID()}`
        toolCalls.push({ id, name: open.name, arguments: open.json })
        blocks.push({ type: 'tool-call', id, name: open.name, input: loggedArguments(open.json), arguments: open.json })
      }
    }
    return {
      blocks,
      text,
      toolCalls,
      usage: this.usage,
      stopReason: this.#stopReason,
      responseId: this.#responseId,
    }
  }
}
