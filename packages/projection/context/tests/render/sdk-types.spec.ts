import type { MessageCreateParamsNonStreaming, MessageParam } from '@anthropic-ai/sdk/resources/messages'
import type { ChatCompletionCreateParamsNonStreaming, ChatCompletionMessageParam } from 'openai/resources/chat/completions'
import type { ResponseCreateParams, ResponseInputItem } from 'openai/resources/responses/responses'
import { describe, expect, it } from 'vitest'
import {
  type AnthropicMessage,
  type AnthropicRequest,
  type ChatMessage,
  type ChatRequest,
  type ResponsesItem,
  type ResponsesRequest,
  renderAnthropic,
  renderChat,
  renderResponses,
} from '../../src/index.js'
import { attachments, fixtureContext } from './fixture.js'

/**
 * The rendered bodies checked against the providers' SDK types: these
 * assertions are compiled by `tsc --noEmit` over the tests (the SDKs are
 * devDependencies; src never imports them). Each `@ts-expect-error` is a
 * control showing the check is not vacuous.
 */
type Assignable<From, To> = [From] extends [To] ? true : false
const checks: {
  chatMessage: Assignable<ChatMessage, ChatCompletionMessageParam>
  chatRequest: Assignable<ChatRequest, ChatCompletionCreateParamsNonStreaming>
  responsesItem: Assignable<ResponsesItem, ResponseInputItem>
  responsesRequest: Assignable<ResponsesRequest, ResponseCreateParams>
  anthropicMessage: Assignable<AnthropicMessage, MessageParam>
  anthropicRequest: Assignable<AnthropicRequest & { max_tokens: number }, MessageCreateParamsNonStreaming>
} = {
  chatMessage: true,
  chatRequest: true,
  responsesItem: true,
  responsesRequest: true,
  anthropicMessage: true,
  anthropicRequest: true,
}

describe('rendered bodies and the provider SDK types', () => {
  it('each body is assignable to its SDK request type (a compile-time check; the values are the fixture renders)', () => {
    const chat = renderChat(fixtureContext, { attachments }).body satisfies ChatCompletionCreateParamsNonStreaming
    const responses = renderResponses(fixtureContext, { attachments }).body satisfies ResponseCreateParams
    const anthropic = {
      ...renderAnthropic(fixtureContext, { attachments }).body,
      max_tokens: 1024,
    } satisfies MessageCreateParamsNonStreaming
    const chatMessages: ChatCompletionMessageParam[] = chat.messages
    const inputItems: ResponseInputItem[] = responses.input
    const messageParams: MessageParam[] = anthropic.messages
    expect(chatMessages.length).toBeGreaterThan(0)
    expect(inputItems.length).toBeGreaterThan(0)
    expect(messageParams.length).toBeGreaterThan(0)
    expect(Object.values(checks).every((c) => c)).toBe(true)

    // @ts-expect-error control: a Chat request needs its messages
    ;({ model: chat.model }) satisfies ChatCompletionCreateParamsNonStreaming
    // @ts-expect-error control: a tool message needs the call it answers
    ;({ role: 'tool', content: 'x' }) satisfies ChatCompletionMessageParam
    // @ts-expect-error control: an Anthropic request needs max_tokens
    ;({ model: anthropic.model, messages: anthropic.messages }) satisfies MessageCreateParamsNonStreaming
  })
})
