import type { MessageParam } from '@anthropic-ai/sdk/resources/messages'
import type { Summarizer } from '@dsh/compaction'
import { renderAnthropic } from '@dsh/session-context'
import type { AnthropicClient } from './model.js'
import { tokenUsage } from './usage.js'

export interface AnthropicSummarizerOptions {
  readonly client: AnthropicClient
  /** The model that summarizes (default the client's). */
  readonly model?: string
}

/**
 * Service `summarizer` of `@dsh/compaction` over an Anthropic client: the
 * shadowed context rendered as Messages (with its cache breakpoints; images
 * and PDFs from the request's `attachments`), then
 * the compaction's instruction as the last user text, in one streamed
 * request without tools and without extended thinking. The answer's text is
 * the summary; its usage is stored with it. A failed request rejects with
 * the client's `DriverAnthropicError`.
 */
export function createAnthropicSummarizer(options: AnthropicSummarizerOptions): Summarizer {
  const { client } = options
  const model = options.model ?? client.model
  return {
    async summarize({ context, instruction, attachments, signal }) {
      // The bytes of the range's images and files, read by the compaction service as a step reads them.
      const { body } = renderAnthropic(context, { model, ...(attachments === undefined ? {} : { attachments }) })
      const messages = body.messages as MessageParam[]
      const last = messages.at(-1)
      // The instruction joins a trailing user message (the API wants roles to alternate).
      const asked: MessageParam[] =
        last?.role === 'user'
          ? [...messages.slice(0, -1), { role: 'user', content: [...(last.content as []), { type: 'text', text: instruction }] }]
          : [...messages, { role: 'user', content: [{ type: 'text', text: instruction }] }]
      const step = await client.step({
        system: body.system,
        messages: asked,
        tools: [],
        signal: signal ?? new AbortController().signal,
        onText: () => {},
        onThinking: () => {},
        model,
        noThinking: true,
      })
      const usage = step.usage
      return {
        // The summary is stored in the log: a server that echoes the key leaves no trace of it there either.
        summary: client.redact(step.text),
        provider: client.provider,
        model,
        ...(usage === undefined ? {} : { usage: tokenUsage(usage) }),
      }
    },
  }
}
