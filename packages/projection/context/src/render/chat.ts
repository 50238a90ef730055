import type { AttachmentRef, ContentBlock } from '@dsh/session'
import type { ContextMessage, SessionContext } from '../types.js'
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

export type ChatTextPart = { type: 'text'; text: string }
export type ChatImagePart = { type: 'image_url'; image_url: { url: string } }
export type ChatFilePart = { type: 'file'; file: { file_data: string; filename: string } }
export type ChatUserPart = ChatTextPart | ChatImagePart | ChatFilePart
export type ChatToolCall = { id: string; type: 'function'; function: { name: string; arguments: string } }
export type ChatSystemMessage = { role: 'system'; content: string | ChatTextPart[] }
export type ChatUserMessage = { role: 'user'; content: string | ChatUserPart[] }
export type ChatAssistantMessage = {
  role: 'assistant'
  content: string | ChatTextPart[] | null
  tool_calls?: ChatToolCall[]
  /** DeepSeek's thinking mode: the step's reasoning, on a message that calls tools (see {@link ChatRenderOptions}). */
  reasoning_content?: string
}
export type ChatToolMessage = { role: 'tool'; tool_call_id: string; content: string }
/** A Chat Completions message (assignable to the SDK's `ChatCompletionMessageParam`). */
export type ChatMessage = ChatSystemMessage | ChatUserMessage | ChatAssistantMessage | ChatToolMessage
/** The context's part of a Chat Completions request; add tools, sampling and the rest. */
export type ChatRequest = { model: string; messages: ChatMessage[] }

/** Chat options. */
export type ChatRenderOptions = RenderOptions & {
  /**
   * Sends an assistant message's reasoning back as `reasoning_content` when
   * the message calls tools (DeepSeek's thinking mode requires it there and
   * ignores it elsewhere); otherwise reasoning is left out and counted.
   */
  readonly reasoningContent?: boolean
  /** A system message sent first (a non-empty prompt); none when absent. */
  readonly system?: string
}

/** The system message `options` asks for, as the first of the request's messages. */
function systemHead(options: ChatRenderOptions): ChatMessage[] {
  return options.system === undefined || options.system.length === 0 ? [] : [{ role: 'system', content: options.system }]
}

/** The media types the Chat `file` part takes. */
const CHAT_FILE_TYPES: ReadonlySet<string> = new Set(['application/pdf'])

function fileName(ref: AttachmentRef): string {
  return ref.name ?? `${ref.digest.slice(0, 12)}.${ref.mediaType.split('/')[1] ?? 'bin'}`
}

/** One attachment block as a user content part: image_url / file data URLs, or a text note. */
function attachmentPart(
  block: ContentBlock & { type: 'image' | 'file' },
  where: 'user' | 'other',
  resolver: AttachmentResolver | undefined,
  counts: WarningCounts,
): ChatUserPart {
  const ref = block.attachment
  const supported = where === 'user' && (block.type === 'image' || CHAT_FILE_TYPES.has(ref.mediaType))
  if (!supported) {
    warn(counts, 'unsupported-block')
    return { type: 'text', text: unsupportedText(block.type, ref) }
  }
  const base64 = bytesOf(ref, resolver)
  if (base64 === undefined) {
    warn(counts, 'missing-attachment')
    return { type: 'text', text: missingAttachmentText(ref) }
  }
  if (block.type === 'image') return { type: 'image_url', image_url: { url: dataUrl(ref, base64) } }
  return { type: 'file', file: { file_data: dataUrl(ref, base64), filename: fileName(ref) } }
}

/** The parts of a message's blocks (text, attachments); tool blocks and reasoning are handled by the caller. */
function contentParts(
  blocks: readonly ContentBlock[],
  where: 'user' | 'other',
  resolver: AttachmentResolver | undefined,
  counts: WarningCounts,
): ChatUserPart[] {
  const parts: ChatUserPart[] = []
  for (const block of blocks) {
    switch (block.type) {
      case 'text':
        if (block.text.length > 0) parts.push({ type: 'text', text: block.text })
        break
      case 'image':
      case 'file':
        parts.push(attachmentPart(block, where, resolver, counts))
        break
      case 'reasoning':
        warn(counts, 'reasoning-dropped')
        break
      default:
        warn(counts, 'unsupported-block')
    }
  }
  return parts
}

function textOnly(parts: readonly ChatUserPart[]): string {
  return parts.map((part) => (part.type === 'text' ? part.text : '')).join('\n')
}

/** Text parts as a string when there is one, else the list. */
function textContent(parts: readonly ChatUserPart[]): string | ChatTextPart[] {
  const texts = parts.filter((part): part is ChatTextPart => part.type === 'text')
  return texts.length === 1 ? (texts[0] as ChatTextPart).text : texts
}

/**
 * One context message as Chat messages (none when nothing in it can be
 * sent). Pure; `counts` receives what was left out.
 */
export function chatMessage(
  message: ContextMessage,
  resolver: AttachmentResolver | undefined,
  counts: WarningCounts,
  reasoningContent = false,
): ChatMessage[] {
  const blocks = knownBlocks(message, counts)
  switch (message.role) {
    case 'system': {
      const parts = contentParts(blocks, 'other', resolver, counts)
      return parts.length === 0 ? [] : [{ role: 'system', content: textContent(parts) }]
    }
    case 'user': {
      const parts = contentParts(blocks, 'user', resolver, counts)
      if (parts.length === 0) return []
      const only = parts[0]
      return [{ role: 'user', content: parts.length === 1 && only?.type === 'text' ? only.text : parts }]
    }
    case 'assistant': {
      const calls: ChatToolCall[] = []
      for (const block of blocks) {
        if (block.type === 'tool-call') {
          calls.push({ id: block.id, type: 'function', function: { name: block.name, arguments: argumentsOf(block) } })
        }
      }
      const sendReasoning = reasoningContent && calls.length > 0
      const parts = contentParts(
        blocks.filter((block) => block.type !== 'tool-call' && !(sendReasoning && block.type === 'reasoning')),
        'other',
        resolver,
        counts,
      )
      if (parts.length === 0 && calls.length === 0) return []
      const out: ChatAssistantMessage = { role: 'assistant', content: parts.length === 0 ? null : textContent(parts) }
      if (calls.length > 0) out.tool_calls = calls
      const reasoning = sendReasoning ? blocks.flatMap((block) => (block.type === 'reasoning' ? [block.text] : [])).join('') : ''
      if (reasoning.length > 0) out.reasoning_content = reasoning
      return [out]
    }
    case 'tool': {
      const out: ChatMessage[] = []
      for (const block of blocks) {
        if (block.type !== 'tool-result') {
          warn(counts, 'unsupported-block')
          continue
        }
        const text = textOnly(contentParts(block.content, 'other', resolver, counts))
        out.push({ role: 'tool', tool_call_id: block.callId, content: block.isError === true ? errorText(text) : text })
      }
      return out
    }
  }
}

/** One context message's Chat messages under `options` (after its `rewrite`). */
function chatMessageOf(message: ContextMessage, options: ChatRenderOptions, counts: WarningCounts): ChatMessage[] {
  const out = rewritten(options, message)
  return out === null ? [] : chatMessage(out, options.attachments, counts, options.reasoningContent)
}

/** Messages as Chat messages, in order. Pure; renders each message once. */

export function renderChatMessages(
  messages: readonly ContextMessage[],
  options: ChatRenderOptions = {},
): { messages: ChatMessage[]; warnings: WarningCounts } {
  const counts: WarningCounts = {}
  const out: ChatMessage[] = []
  for (const message of messages) out.push(...chatMessageOf(message, options, counts))
  return { messages: out, warnings: counts }
}

/**
 * A Chat renderer that keeps what it rendered: each `render` renders only
 * the messages that changed since the previous one (appending k messages
 * renders k) and its body equals a fresh {@link renderChat} of the same
 * context. A view in view order (`contextView`'s common case) is synced
 * from its layout, and the body's `messages` is the renderer's own kept
 * list, extended in place: a step costs its new messages, not the length of
 * the conversation. That list is valid until the next `render`; copy it to
 * keep it longer.
 */
export function chatRenderer(options: ChatRenderOptions = {}): IncrementalRenderer<ChatRequest> {
  const parts = new FlatParts<ChatMessage>((message, counts) => chatMessageOf(message, options, counts), systemHead(options))
  return {
    render(context: SessionContext): Rendered<ChatRequest> {
      parts.syncContext(context)
      const counts: WarningCounts = {}
      const model = modelOf(options, context, counts)
      return { body: { model, messages: parts.items() as ChatMessage[] }, warnings: parts.parts.warnings(counts) }
    },
    get stats(): RenderStats {
      return parts.parts.counters
    },
  }
}

/**
 * The context as the `model` and `messages` of an OpenAI Chat Completions
 * request: images as `image_url` data URLs, PDFs as `file` parts (user
 * messages only; elsewhere a counted text note), reasoning left out and
 * counted (or, with `reasoningContent`, sent on messages that call tools),
 * calls as `tool_calls` with JSON-string arguments, each result as a
 * `tool` message (an error result's text begins with `Error`); `system`
 * first when given.
 */
export function renderChat(context: SessionContext, options: ChatRenderOptions = {}): Rendered<ChatRequest> {
  const counts: WarningCounts = {}
  const model = modelOf(options, context, counts)
  const { messages, warnings } = renderChatMessages(context.messages, options)
  const head = systemHead(options)
  return { body: { model, messages: head.length === 0 ? messages : [...head, ...messages] }, warnings: totalWarnings(counts, warnings) }
}
