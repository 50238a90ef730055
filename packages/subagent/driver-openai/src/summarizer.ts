import type { Summarizer } from '@dsh/compaction'
import { renderChat } from '@dsh/session-context'
import type { ChatCompletionMessageParam } from 'openai/resources/chat/completions'
import type { ModelClient } from './model.js'

export interface OpenAISummarizerOptions {
  readonly client: ModelClient
  /** The model that summarizes (default the client's). */
  readonly model?: string
}

/**
 * Service `summarizer` of `@dsh/compaction` over an OpenAI-compatible
 * client: the shadowed context rendered as Chat messages (images and files
 * from the request's `attachments`), then the compaction's instruction as a
 * user message, in one streamed request without tools. The answer's text is the summary; its usage is stored
 * with it. A failed request rejects with the client's `DriverOpenAIError`
 * (a window the request does not fit is `DRIVER_OPENAI_BAD_REQUEST`).
 */
export function createOpenAISummarizer(options: OpenAISummarizerOptions): Summarizer {
  const { client } = options
  const model = options.model ?? client.model
  return {
    async summarize({ context, instruction, attachments, signal }) {
      // The bytes of the range's images and files, read by the compaction service as a step reads them.
      const { body } = renderChat(context, { model, ...(attachments === undefined ? {} : { attachments }) })
      const messages = [...(body.messages as ChatCompletionMessageParam[]), { role: 'user', content: instruction } as const]
      const step = await client.step({
        messages,
        tools: [],
        signal: signal ?? new AbortController().signal,
        onContent: () => {},
        onReasoning: () => {},
        model,
      })
      const usage = step.usage
      return {
        // The summary is stored in the log: a server that echoes the key leaves no trace of it there either.
        summary: client.redact(step.text),
        provider: client.provider,
        model,
        ...(usage === undefined
          ? {}
          : { usage: { input: usage.input, output: usage.output, cacheRead: usage.cacheRead, reasoning: usage.reasoning } }),
      }
    },
  }
}
