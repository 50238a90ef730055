import type { ContextBlock, ContextMessage, SessionContext } from '@dsh/session-context'

/** Tokens counted for each message besides its content (role and framing, as chat formats add). */
export const MESSAGE_OVERHEAD_TOKENS = 4
/** Tokens counted for an image or file block (its bytes are not text; providers bill them by size, not characters). */
export const ATTACHMENT_TOKENS = 1_000

/**
 * The text of a block as a model reads it: text and reasoning, a call's name
 * and JSON arguments, a result's content; any other block (a child's
 * `notice`, which a driver phrases into text) by its JSON, which holds the
 * text a phrasing carries. Attachments count as {@link ATTACHMENT_TOKENS}
 * and have no text here.
 */
export function blockText(block: ContextBlock): string {
  switch (block.type) {
    case 'text':
    case 'reasoning':
      return typeof block.text === 'string' ? block.text : ''
    case 'tool-call': {
      const call = block as { name?: unknown; input?: unknown; arguments?: unknown }
      const args = typeof call.arguments === 'string' ? call.arguments : JSON.stringify(call.input ?? null)
      return `${String(call.name)}${args}`
    }
    case 'tool-result': {
      const content = (block as { content?: unknown }).content
      return Array.isArray(content) ? content.map((b) => blockText(b as ContextBlock)).join('') : ''
    }
    case 'image':
    case 'file':
      return ''
    default:
      return JSON.stringify(block)
  }
}

const attachments = (blocks: readonly ContextBlock[]): number =>
  blocks.reduce(
    (n, b) =>
      n +
      (b.type === 'image' || b.type === 'file'
        ? 1
        : b.type === 'tool-result'
          ? attachments(((b as { content?: unknown }).content as ContextBlock[] | undefined) ?? [])
          : 0),
    0,
  )

/** The estimated tokens of one message: characters / 4 of its text, plus attachments and overhead. */
export function estimateMessageTokens(message: ContextMessage): number {
  const chars = message.blocks.reduce((n, b) => n + blockText(b).length, 0)
  return Math.ceil(chars / 4) + attachments(message.blocks) * ATTACHMENT_TOKENS + MESSAGE_OVERHEAD_TOKENS
}

/**
 * The estimated input tokens of a context: characters / 4 (see the README
 * for the measurement behind it). An estimate, not a count: a budget
 * fraction below 1 leaves the margin.
 */
export function estimateTokens(context: Pick<SessionContext, 'messages'>): number {
  return context.messages.reduce((n, m) => n + estimateMessageTokens(m), 0)
}
