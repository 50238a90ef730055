import type { AttachmentRef, ContentBlock, JsonValue } from '@dsh/session'
import type { ContextMessage, SessionContext } from '../types.js'
import {
  type AttachmentResolver,
  bytesOf,
  type IncrementalRenderer,
  knownBlocks,
  MessageParts,
  missingAttachmentText,
  modelOf,
  type Rendered,
  type RenderOptions,
  type RenderStats,
  type RenderWarnings,
  totalWarnings,
  unsupportedText,
  type WarningCounts,
  warn,
} from './common.js'

export type AnthropicCacheControl = { type: 'ephemeral' }
type Cacheable = { cache_control?: AnthropicCacheControl }
export type AnthropicImageType = 'image/jpeg' | 'image/png' | 'image/gif' | 'image/webp'
export type AnthropicText = Cacheable & { type: 'text'; text: string }
export type AnthropicImage = Cacheable & {
  type: 'image'
  source: { type: 'base64'; media_type: AnthropicImageType; data: string }
}
export type AnthropicDocument = Cacheable & {
  type: 'document'
  source: { type: 'base64'; media_type: 'application/pdf'; data: string }
  title?: string
}
export type AnthropicThinking = { type: 'thinking'; thinking: string; signature: string }
export type AnthropicToolUse = Cacheable & { type: 'tool_use'; id: string; name: string; input: JsonValue }
export type AnthropicToolResult = Cacheable & {
  type: 'tool_result'
  tool_use_id: string
  content?: (AnthropicText | AnthropicImage | AnthropicDocument)[]
  is_error?: boolean
}
export type AnthropicBlock = AnthropicText | AnthropicImage | AnthropicDocument | AnthropicThinking | AnthropicToolUse | AnthropicToolResult
/** An Anthropic message (assignable to the SDK's `MessageParam`). */
export type AnthropicMessage = { role: 'user' | 'assistant'; content: AnthropicBlock[] }
/** The context's part of a Messages request; add `max_tokens`, tools and the rest. */
export type AnthropicRequest = { model: string; system?: AnthropicText[]; messages: AnthropicMessage[] }

export type AnthropicRenderOptions = RenderOptions & {
  /**
   * Mark the stable prefix with `cache_control: {type: 'ephemeral'}` (default
   * true): the last system block, the last message before the newest turn,
   * and the last message — at most 3 of the API's 4 breakpoints.
   */
  readonly cache?: boolean
}

/** One message's blocks before merging; `system` parts become the top-level system when they lead the context. */
export type AnthropicPart = { role: 'system' | 'user' | 'assistant'; content: AnthropicBlock[] }

const IMAGE_TYPES: ReadonlySet<string> = new Set<AnthropicImageType>(['image/jpeg', 'image/png', 'image/gif', 'image/webp'])
const EPHEMERAL: AnthropicCacheControl = { type: 'ephemeral' }

function attachment(
  kind: 'image' | 'file',
  ref: AttachmentRef,
  resolver: AttachmentResolver | undefined,
  counts: WarningCounts,
): AnthropicText | AnthropicImage | AnthropicDocument {
  const supported = kind === 'image' ? IMAGE_TYPES.has(ref.mediaType) : ref.mediaType === 'application/pdf'
  if (!supported) {
    warn(counts, 'unsupported-block')
    return { type: 'text', text: unsupportedText(kind, ref) }
  }
  const data = bytesOf(ref, resolver)
  if (data === undefined) {
    warn(counts, 'missing-attachment')
    return { type: 'text', text: missingAttachmentText(ref) }
  }
  if (kind === 'image') {
    return { type: 'image', source: { type: 'base64', media_type: ref.mediaType as AnthropicImageType, data } }
  }
  const doc: AnthropicDocument = { type: 'document', source: { type: 'base64', media_type: 'application/pdf', data } }
  if (ref.name !== undefined) doc.title = ref.name
  return doc
}

function isRecord(value: JsonValue): value is { readonly [key: string]: JsonValue } {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

function blocksOf(
  message: ContextMessage,
  blocks: readonly ContentBlock[],
  resolver: AttachmentResolver | undefined,
  counts: WarningCounts,
): AnthropicBlock[] {
  const out: AnthropicBlock[] = []
  const role = message.role
  for (const block of blocks) {
    switch (block.type) {
      case 'text':
        if (block.text.length > 0) out.push({ type: 'text', text: block.text })
        break
      case 'image':
      case 'file':
        if (role === 'user' || role === 'tool') out.push(attachment(block.type, block.attachment, resolver, counts))
        else {
          warn(counts, 'unsupported-block')
          out.push({ type: 'text', text: unsupportedText(block.type, block.attachment) })
        }
        break
      case 'reasoning':
        if (role === 'assistant' && block.signature !== undefined) {
          out.push({ type: 'thinking', thinking: block.text, signature: block.signature })
        } else warn(counts, 'reasoning-dropped')
        break
      case 'tool-call':
        if (role !== 'assistant') {
          warn(counts, 'unsupported-block')
          break
        }
        if (!isRecord(block.input)) warn(counts, 'unsupported-block')
        out.push({ type: 'tool_use', id: block.id, name: block.name, input: isRecord(block.input) ? block.input : {} })
        break
      case 'tool-result': {
        if (role !== 'tool') {
          warn(counts, 'unsupported-block')
          break
        }
        // A tool_result carries text, images and documents; a result nested in it cannot be carried.
        const content: (AnthropicText | AnthropicImage | AnthropicDocument)[] = []
        for (const b of blocksOf(message, block.content, resolver, counts)) {
          if (b.type === 'text' || b.type === 'image' || b.type === 'document') content.push(b)
          else warn(counts, 'unsupported-block')
        }
        const result: AnthropicToolResult = { type: 'tool_result', tool_use_id: block.callId }
        if (content.length > 0) result.content = content
        if (block.isError === true) result.is_error = true
        out.push(result)
        break
      }
      default:
        warn(counts, 'unsupported-block')
    }
  }
  return out
}

/** One context message as Anthropic blocks under its API role (a tool result is a user message). Pure. */
export function anthropicPart(message: ContextMessage, resolver: AttachmentResolver | undefined, counts: WarningCounts): AnthropicPart {
  const content = blocksOf(message, knownBlocks(message, counts), resolver, counts)
  return { role: message.role === 'tool' ? 'user' : message.role, content }
}

/**
 * Parts merged as the API requires: the leading system parts become the
 * top-level system, a later system part becomes user text (counted), and
 * consecutive parts of one role become one message. Kept between renders:
 * `rebuild(parts, from)` re-merges only from the group holding part `from`.
 */
class Merged {
  system: AnthropicText[] = []
  readonly messages: AnthropicMessage[] = []
  /** Number of leading system parts. */
  private leading = 0
  /** `messages.length` before each part was merged. */
  private readonly at: number[] = []
  /** The first part of each message. */
  private readonly first: number[] = []
  /** Per part: a system part sent as user text. */
  private readonly late: boolean[] = []
  private lateCount = 0

  rebuild(parts: readonly AnthropicPart[], from: number): void {
    let start: number
    if (from < this.leading || this.leading === this.at.length) {
      start = 0
    } else {
      const len = this.at[from] ?? this.messages.length
      start = len > 0 ? (this.first[len - 1] as number) : this.leading
    }
    if (start === 0) {
      this.system = []
      this.leading = 0
    }
    this.messages.length = start === 0 ? 0 : (this.at[start] as number)
    this.first.length = this.messages.length
    for (let i = start; i < this.at.length; i++) if (this.late[i] === true) this.lateCount--
    this.at.length = start
    this.late.length = start
    for (let i = start; i < parts.length; i++) this.add(parts[i] as AnthropicPart, i)
  }

  private add(part: AnthropicPart, index: number): void {
    this.at.push(this.messages.length)
    if (part.role === 'system' && this.leading === index) {
      this.late.push(false)
      this.leading++
      const texts = part.content.filter((b): b is AnthropicText => b.type === 'text')
      this.system = [...this.system, ...texts]
      return
    }
    const late = part.role === 'system'
    this.late.push(late)
    if (late) this.lateCount++
    if (part.content.length === 0) return
    const role = part.role === 'assistant' ? 'assistant' : 'user'
    const last = this.messages.at(-1)
    if (last !== undefined && last.role === role) {
      this.messages[this.messages.length - 1] = { role, content: [...last.content, ...part.content] }
    } else {
      this.first.push(index)
      this.messages.push({ role, content: part.content })
    }
  }

  get systemAsUser(): number {
    return this.lateCount
  }
}

/** The block with a cache breakpoint (a copy); thinking blocks take none. */
function withBreakpoint(message: AnthropicMessage): AnthropicMessage {
  for (let i = message.content.length - 1; i >= 0; i--) {
    const block = message.content[i] as AnthropicBlock
    if (block.type === 'thinking') continue
    const content = message.content.slice()
    content[i] = { ...block, cache_control: EPHEMERAL }
    return { role: message.role, content }
  }
  return message
}

/** Where the newest turn begins: the last user message holding more than tool results (-1: none). */
function newestTurn(messages: readonly AnthropicMessage[]): number {
  for (let i = messages.length - 1; i >= 0; i--) {
    const message = messages[i] as AnthropicMessage
    if (message.role === 'user' && message.content.some((block) => block.type !== 'tool_result')) return i
  }
  return -1
}

function assemble(
  context: SessionContext,
  options: AnthropicRenderOptions,
  merged: Merged,
  warnings: (extra: WarningCounts) => RenderWarnings,
): Rendered<AnthropicRequest> {
  const counts: WarningCounts = {}
  const model = modelOf(options, context, counts)
  if (merged.systemAsUser > 0) counts['system-as-user'] = merged.systemAsUser
  const messages = merged.messages.slice()
  let system = merged.system
  if (options.cache !== false) {
    if (system.length > 0) {
      system = system.slice()
      system[system.length - 1] = { ...(system.at(-1) as AnthropicText), cache_control: EPHEMERAL }
    }
    const turn = newestTurn(messages)
    if (turn > 0) messages[turn - 1] = withBreakpoint(messages[turn - 1] as AnthropicMessage)
    if (messages.length > 0 && messages.length - 1 !== turn - 1) {
      messages[messages.length - 1] = withBreakpoint(messages.at(-1) as AnthropicMessage)
    }
  }
  const body: AnthropicRequest = system.length > 0 ? { model, system, messages } : { model, messages }
  return { body, warnings: warnings(counts) }
}

/** Messages as unmerged Anthropic parts, in order. Pure; renders each message once. */
export function renderAnthropicParts(
  messages: readonly ContextMessage[],
  options: RenderOptions = {},
): { parts: AnthropicPart[]; warnings: WarningCounts } {
  const counts: WarningCounts = {}
  const parts = messages.map((message) => anthropicPart(message, options.attachments, counts))
  return { parts, warnings: counts }
}

/**
 * The context as the `model`, `system` and `messages` of an Anthropic
 * Messages request: text, thinking with its signature, base64 images,
 * PDFs as documents, `tool_use`, `tool_result` with `is_error`; consecutive
 * messages of one role merged; cache breakpoints on the stable prefix.
 */
export function renderAnthropic(context: SessionContext, options: AnthropicRenderOptions = {}): Rendered<AnthropicRequest> {
  const { parts, warnings } = renderAnthropicParts(context.messages, options)
  const merged = new Merged()
  merged.rebuild(parts, 0)
  return assemble(context, options, merged, (extra) => totalWarnings(warnings, extra))
}

/**
 * An Anthropic renderer that keeps what it rendered: each `render` renders
 * only the messages that changed since the previous one and re-merges only
 * from the message group holding the first change; its body equals a fresh
 * {@link renderAnthropic} of the same context.
 */
export function anthropicRenderer(options: AnthropicRenderOptions = {}): IncrementalRenderer<AnthropicRequest> {
  const parts = new MessageParts<AnthropicPart>((message, counts) => anthropicPart(message, options.attachments, counts))
  const merged = new Merged()
  return {
    render(context: SessionContext): Rendered<AnthropicRequest> {
      const from = parts.syncContext(context)
      merged.rebuild(parts.parts, from)
      return assemble(context, options, merged, (extra) => parts.warnings(extra))
    },
    get stats(): RenderStats {
      return parts.counters
    },
  }
}
