import type { ContentBlock, ReasoningBlock } from '@dsh/session'
import type { ContextMessage, SessionContext } from '../types.js'
import { viewLayout } from '../view.js'
import {
  type AttachmentResolver,
  argumentsOf,
  bytesOf,
  dataUrl,
  errorText,
  FlatParts,
  type IncrementalRenderer,
  knownBlocks,
  missingAttachmentText,
  modelOf,
  type Rendered,
  type RenderOptions,
  type RenderStats,
  rewritten,
  totalWarnings,
  unsupportedText,
  type WarningCounts,
  warn,
} from './common.js'

export type ResponsesInputText = { type: 'input_text'; text: string }
export type ResponsesInputImage = { type: 'input_image'; image_url: string; detail: 'auto' }
export type ResponsesInputFile = { type: 'input_file'; file_data: string; filename: string }
export type ResponsesContent = ResponsesInputText | ResponsesInputImage | ResponsesInputFile
export type ResponsesMessageItem = { type: 'message'; role: 'system' | 'user'; content: ResponsesContent[] }
/** Assistant text goes back as a plain string (the API takes only output text for the assistant role). */
export type ResponsesAssistantItem = { type: 'message'; role: 'assistant'; content: string }
export type ResponsesFunctionCallItem = { type: 'function_call'; call_id: string; name: string; arguments: string }
export type ResponsesFunctionOutputItem = {
  type: 'function_call_output'
  call_id: string
  output: string | ResponsesContent[]
}
export type ResponsesReasoningItem = {
  type: 'reasoning'
  id: string
  summary: { type: 'summary_text'; text: string }[]
  encrypted_content: string
}
/** An OpenAI Responses input item (assignable to the SDK's `ResponseInputItem`). */
export type ResponsesItem =
  | ResponsesMessageItem
  | ResponsesAssistantItem
  | ResponsesFunctionCallItem
  | ResponsesFunctionOutputItem
  | ResponsesReasoningItem
/** The context's part of a Responses request; add tools, `store`, `include` and the rest. */
export type ResponsesRequest = { model: string; input: ResponsesItem[]; previous_response_id?: string }

/**
 * The response a request continues: its id and the last event seq it
 * covered (its `step/end`). Context messages after that seq are sent, the
 * rest is the server's.
 */
export type PreviousResponse = { readonly id: string; readonly throughSeq: number }

export type ResponsesRenderOptions = RenderOptions & {
  readonly previousResponse?: PreviousResponse
  /**
   * The provider's item id of a reasoning block (the API takes reasoning
   * back only with its id and encrypted content). Default: the block's own
   * `id` field, when a driver recorded one beside `signature`.
   */
  readonly reasoningId?: (block: ReasoningBlock, message: ContextMessage) => string | undefined
}

const FILE_TYPES: ReadonlySet<string> = new Set(['application/pdf'])

function defaultReasoningId(block: ReasoningBlock): string | undefined {
  const id = (block as { readonly id?: unknown }).id
  return typeof id === 'string' ? id : undefined
}

function content(blocks: readonly ContentBlock[], resolver: AttachmentResolver | undefined, counts: WarningCounts): ResponsesContent[] {
  const out: ResponsesContent[] = []
  for (const block of blocks) {
    switch (block.type) {
      case 'text':
        if (block.text.length > 0) out.push({ type: 'input_text', text: block.text })
        break
      case 'image':
      case 'file': {
        const ref = block.attachment
        if (block.type === 'file' && !FILE_TYPES.has(ref.mediaType)) {
          warn(counts, 'unsupported-block')
          out.push({ type: 'input_text', text: unsupportedText('file', ref) })
          break
        }
        const base64 = bytesOf(ref, resolver)
        if (base64 === undefined) {
          warn(counts, 'missing-attachment')
          out.push({ type: 'input_text', text: missingAttachmentText(ref) })
        } else if (block.type === 'image') {
          out.push({ type: 'input_image', image_url: dataUrl(ref, base64), detail: 'auto' })
        } else {
          out.push({ type: 'input_file', file_data: dataUrl(ref, base64), filename: ref.name ?? `${ref.digest.slice(0, 12)}.pdf` })
        }
        break
      }
      case 'reasoning':
        warn(counts, 'reasoning-dropped')
        break
      default:
        warn(counts, 'unsupported-block')
    }
  }
  return out
}

function assistantItems(
  message: ContextMessage,
  blocks: readonly ContentBlock[],
  options: ResponsesRenderOptions,
  counts: WarningCounts,
): ResponsesItem[] {
  const items: ResponsesItem[] = []
  let text: string[] = []
  const flush = (): void => {
    if (text.length > 0) items.push({ type: 'message', role: 'assistant', content: text.join('\n') })
    text = []
  }
  for (const block of blocks) {
    switch (block.type) {
      case 'text':
        if (block.text.length > 0) text.push(block.text)
        break
      case 'reasoning': {
        const id = (options.reasoningId ?? defaultReasoningId)(block, message)
        if (block.signature === undefined || id === undefined) {
          warn(counts, 'reasoning-dropped')
          break
        }
        flush()
        const summary = block.text.length > 0 ? [{ type: 'summary_text' as const, text: block.text }] : []
        items.push({ type: 'reasoning', id, summary, encrypted_content: block.signature })
        break
      }
      case 'tool-call':
        flush()
        items.push({ type: 'function_call', call_id: block.id, name: block.name, arguments: argumentsOf(block) })
        break
      case 'image':
      case 'file':
        warn(counts, 'unsupported-block')
        text.push(unsupportedText(block.type, block.attachment))
        break
      default:
        warn(counts, 'unsupported-block')
    }
  }
  flush()
  return items
}

/** One context message as Responses input items, after `options.rewrite` (none when nothing in it can be sent). Pure. */
export function responsesItems(original: ContextMessage, options: ResponsesRenderOptions, counts: WarningCounts): ResponsesItem[] {
  const message = rewritten(options, original)
  if (message === null) return []
  const blocks = knownBlocks(message, counts)
  switch (message.role) {
    case 'system':
    case 'user': {
      const parts = content(blocks, options.attachments, counts)
      return parts.length === 0 ? [] : [{ type: 'message', role: message.role, content: parts }]
    }
    case 'assistant':
      return assistantItems(message, blocks, options, counts)
    case 'tool': {
      const out: ResponsesItem[] = []
      for (const block of blocks) {
        if (block.type !== 'tool-result') {
          warn(counts, 'unsupported-block')
          continue
        }
        const parts = content(block.content, options.attachments, counts)
        const texts = parts.every((part) => part.type === 'input_text')
        let output: string | ResponsesContent[]
        if (texts) {
          const text = parts.map((part) => (part as ResponsesInputText).text).join('\n')
          output = block.isError === true ? errorText(text) : text
        } else {
          output = block.isError === true ? [{ type: 'input_text', text: 'Error:' }, ...parts] : parts
        }
        out.push({ type: 'function_call_output', call_id: block.callId, output })
      }
      return out
    }
  }
}

/**
 * The index of the first message the server has not seen under
 * `previous`, or -1 when the context does not continue that response (a
 * compaction since, or no message it covered). Walks back from the end: it
 * costs the messages after the response, not the context. A synthetic
 * result sits right after its call and carries the call's seq, so it counts
 * as new until a later message is covered.
 */
export function firstUnsent(context: SessionContext, previous: PreviousResponse): number {
  if (context.compaction !== null && context.compaction.seq > previous.throughSeq) return -1
  const sent = (message: ContextMessage): boolean => message.synthetic !== true && message.seq <= previous.throughSeq
  const layout = viewLayout(context)
  if (layout !== undefined) {
    // From the end back through the layout: a request continuing the previous response costs the messages after it, not the list.
    for (let t = layout.tail.length - 1; t >= 0; t--) if (sent(layout.tail[t] as ContextMessage)) return layout.committed + t + 1
    let end = layout.committed
    for (let c = layout.chunks.length - 1; c >= 0; c--) {
      const chunk = layout.chunks[c] as readonly ContextMessage[]
      end -= chunk.length
      for (let m = chunk.length - 1; m >= 0; m--) if (sent(chunk[m] as ContextMessage)) return end + m + 1
    }
    return -1
  }
  for (let i = context.messages.length - 1; i >= 0; i--) {
    const message = context.messages[i] as ContextMessage
    if (message.synthetic !== true && message.seq <= previous.throughSeq) return i + 1
  }
  return -1
}

/** Where the input starts under `options.previousResponse` (0: the whole context, without a previous response). */
function startOf(context: SessionContext, options: ResponsesRenderOptions, counts: WarningCounts): number {
  const previous = options.previousResponse
  if (previous === undefined) return 0
  const from = firstUnsent(context, previous)
  if (from >= 0) return from
  warn(counts, 'previous-response-unusable')
  return 0
}

function request(
  context: SessionContext,
  options: ResponsesRenderOptions,
  counts: WarningCounts,
  input: ResponsesItem[],
): ResponsesRequest {
  const model = modelOf(options, context, counts)
  const previous = options.previousResponse
  if (previous !== undefined && counts['previous-response-unusable'] === undefined) {
    return { model, input, previous_response_id: previous.id }
  }
  return { model, input }
}

/**
 * The context as the `model`, `input` and `previous_response_id` of an
 * OpenAI Responses request: messages, `function_call` and
 * `function_call_output` items, reasoning items with their encrypted
 * content. With `previousResponse`, only the messages after it are
 * rendered and sent (and counted in `warnings`).
 */
export function renderResponses(context: SessionContext, options: ResponsesRenderOptions = {}): Rendered<ResponsesRequest> {
  const counts: WarningCounts = {}
  const from = startOf(context, options, counts)
  const input: ResponsesItem[] = []
  for (let i = from; i < context.messages.length; i++) {
    // One push per item: a message of many calls has as many items, too many to spread into `push`.
    for (const item of responsesItems(context.messages[i] as ContextMessage, options, counts)) input.push(item)
  }
  return { body: request(context, options, counts, input), warnings: totalWarnings(counts) }
}

/**
 * A Responses renderer that keeps what it rendered: each `render` renders
 * only the messages that changed since the previous one, and its body
 * equals a fresh {@link renderResponses} of the same context with the same
 * options.
 */
export function responsesRenderer(options: ResponsesRenderOptions = {}): IncrementalRenderer<ResponsesRequest> & {
  /** Renders with a different previous response (the one the driver got back last). */
  render(context: SessionContext, previousResponse?: PreviousResponse): Rendered<ResponsesRequest>
} {
  const parts = new FlatParts<ResponsesItem>((message, counts) => responsesItems(message, options, counts))
  return {
    render(context: SessionContext, previousResponse?: PreviousResponse): Rendered<ResponsesRequest> {
      parts.syncContext(context)
      const counts: WarningCounts = {}
      const effective: ResponsesRenderOptions = previousResponse === undefined ? options : { ...options, previousResponse }
      const start = startOf(context, effective, counts)
      const body = request(context, effective, counts, parts.itemsFrom(start))
      return { body, warnings: parts.parts.warningsFrom(start, counts) }
    },
    get stats(): RenderStats {
      return parts.parts.counters
    },
  }
}
