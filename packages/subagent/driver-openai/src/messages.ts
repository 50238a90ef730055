import type { JsonValue, StoredSessionEvent } from '@dsh/session'
import type {
  ChatCompletionAssistantMessageParam,
  ChatCompletionMessageFunctionToolCall,
  ChatCompletionMessageParam,
} from 'openai/resources/chat/completions'

/** What the model reads for a call the log shows no result for (the turn ended before the tool finished). */
export const MISSING_RESULT_TEXT = 'Error TOOL_NO_RESULT: the turn ended before this tool returned; its effect is unknown.'

/**
 * Builds the Chat Completions context from a session's own log — the whole
 * log, so a fork child sees the prefix it inherited from its parent.
 *
 * Invariants the API insists on, kept here whatever the log holds:
 * - every assistant `tool_calls` entry is followed by exactly one `tool`
 *   message for it before any other message (a call the log shows no result
 *   for gets {@link MISSING_RESULT_TEXT});
 * - a `tool/result` whose call is unknown is dropped (the API would reject it);
 * - a notice that lands mid-step (a child settling between a call and its
 *   result) is read at the next step boundary, never between them.
 *
 * Mapping: `user/message` → user; `assistant/chunk` deltas accumulate the
 * text of the current model step; `tool/call` closes the step as an assistant
 * message with `tool_calls`; `tool/result` → tool; `assistant/message` → the
 * step's final assistant text (it supersedes the step's chunks); a turn that
 * ended without a message keeps its streamed text. Reasoning goes back as
 * `reasoning_content` on every assistant message of a turn that called tools
 * (DeepSeek's thinking mode requires it there and ignores it elsewhere), and
 * nowhere else.
 * Other event types (descriptors, lifecycle) carry no conversation and are skipped,
 * except notices ({@link DEFAULT_NOTICES}, or the `notices` option), which
 * the model reads as user input.
 */
export function buildMessages(
  events: readonly StoredSessionEvent[],
  options: { readonly system?: string; readonly notices?: Readonly<Record<string, (data: JsonValue) => string | undefined>> } = {},
): ChatCompletionMessageParam[] {
  const messages: ChatCompletionMessageParam[] = []
  if (options.system !== undefined && options.system.length > 0) messages.push({ role: 'system', content: options.system })
  let text = ''
  let reasoning = ''
  /** Whether the current turn (since the last user message) called tools: then every step's reasoning goes back. */
  let turnCalledTools = false
  let calls: ChatCompletionMessageFunctionToolCall[] = []
  const unanswered: string[] = []

  const closeCalls = (): void => {
    if (calls.length > 0) {
      // DeepSeek's thinking mode rejects a context whose tool-calling steps lost their reasoning.
      const message: ChatCompletionAssistantMessageParam & { reasoning_content?: string } = {
        role: 'assistant',
        content: text.length > 0 ? text : null,
        tool_calls: calls,
      }
      if (reasoning.length > 0) message.reasoning_content = reasoning
      messages.push(message)
      for (const call of calls) unanswered.push(call.id)
      calls = []
      text = ''
      reasoning = ''
    }
  }
  const answerMissing = (): void => {
    closeCalls()
    for (const id of unanswered.splice(0)) messages.push({ role: 'tool', tool_call_id: id, content: MISSING_RESULT_TEXT })
  }
  const flushText = (): void => {
    answerMissing()
    if (text.length > 0) messages.push({ role: 'assistant', content: text })
    text = ''
    reasoning = ''
  }
  // Notices land on the log whenever a child settles — often in the middle of
  // a step (between a call and its result). They are read at the next step
  // boundary, so a step's text and its calls' results stay together.
  const notices: string[] = []
  const releaseNotices = (): void => {
    if (calls.length > 0 || unanswered.length > 0 || text.length > 0) return
    for (const notice of notices.splice(0)) messages.push({ role: 'user', content: notice })
  }

  for (const event of events) {
    const data = event.data as Record<string, JsonValue> | null
    switch (event.type) {
      case 'user/message':
        flushText()
        releaseNotices()
        turnCalledTools = false
        if (typeof data?.text === 'string') messages.push({ role: 'user', content: data.text })
        break
      case 'assistant/reasoning':
        if (unanswered.length > 0 && calls.length === 0) answerMissing()
        if (typeof data?.delta === 'string') reasoning += data.delta
        break
      case 'assistant/chunk':
        // A chunk after an unanswered call starts a new step: answer the call first.
        if (unanswered.length > 0 && calls.length === 0) answerMissing()
        if (typeof data?.delta === 'string') text += data.delta
        break
      case 'tool/call': {
        if (unanswered.length > 0 && calls.length === 0) answerMissing()
        if (typeof data?.callId !== 'string' || typeof data.name !== 'string') break
        turnCalledTools = true
        const args = data.arguments
        calls.push({
          id: data.callId,
          type: 'function',
          function: { name: data.name, arguments: typeof args === 'string' ? args : JSON.stringify(args ?? {}) },
        })
        break
      }
      case 'tool/result': {
        closeCalls()
        const at = typeof data?.callId === 'string' ? unanswered.indexOf(data.callId) : -1
        if (at < 0) break
        unanswered.splice(at, 1)
        messages.push({
          role: 'tool',
          tool_call_id: data!.callId as string,
          content: toolText(data!.content ?? null, data!.isError === true),
        })
        releaseNotices()
        break
      }
      case 'assistant/message': {
        answerMissing()
        text = ''
        if (typeof data?.text === 'string') {
          const message: ChatCompletionAssistantMessageParam & { reasoning_content?: string } = { role: 'assistant', content: data.text }
          if (turnCalledTools && reasoning.length > 0) message.reasoning_content = reasoning
          messages.push(message)
        }
        reasoning = ''
        releaseNotices()
        break
      }
      case 'turn/end':
        flushText()
        releaseNotices()
        break
      default: {
        const render = options.notices?.[event.type] ?? DEFAULT_NOTICES[event.type]
        const notice = render?.(event.data)
        if (notice !== undefined) {
          notices.push(notice)
          releaseNotices()
        }
      }
    }
  }
  flushText()
  releaseNotices()
  return messages
}

/**
 * How the model reads what its children tell it: a `subagent/notice`
 * (`settled` when a child's run ended, `report` when a child reported) is
 * input on the parent's next turn. Other `subagent/*` events are the
 * runtime's bookkeeping and stay out of the context.
 */
export const DEFAULT_NOTICES: Readonly<Record<string, (data: JsonValue) => string | undefined>> = {
  'subagent/notice': (data) => {
    if (data === null || typeof data !== 'object' || Array.isArray(data)) return undefined
    const notice = data as { readonly [key: string]: JsonValue }
    const who = typeof notice.label === 'string' ? `${JSON.stringify(notice.label)} (${String(notice.child)})` : String(notice.child)
    if (notice.kind === 'report' && typeof notice.text === 'string') return `[report from subagent ${who}]\n${notice.text}`
    if (notice.kind === 'settled') {
      const body = typeof notice.text === 'string' ? `\n${notice.text}` : typeof notice.error === 'string' ? `\n${notice.error}` : ''
      return `[subagent ${who} settled: ${String(notice.reason)}]${body}`
    }
    return undefined
  },
}

/** A logged tool result as the model reads it: its `text` when it has one, else its JSON. */
export function toolText(content: JsonValue, isError: boolean): string {
  if (content !== null && typeof content === 'object' && !Array.isArray(content)) {
    const record = content as { readonly [key: string]: JsonValue }
    if (isError && typeof record.code === 'string' && typeof record.message === 'string') return `Error ${record.code}: ${record.message}`
    if (typeof record.text === 'string') return record.text
  }
  return typeof content === 'string' ? content : JSON.stringify(content)
}
