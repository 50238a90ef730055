import { readFileSync, statSync } from 'node:fs'
import { basename, extname } from 'node:path'
import { MODEL_APIS, type ModelApi } from '@dsh/driver-openai'
import type { ParsedCommand } from '../command.js'
import { CliError } from '../errors.js'

/** The image types `--image` takes, by file extension (what the Chat, Responses and Anthropic image inputs accept). */
export const IMAGE_TYPES: Readonly<Record<string, string>> = {
  '.png': 'image/png',
  '.jpg': 'image/jpeg',
  '.jpeg': 'image/jpeg',
  '.gif': 'image/gif',
  '.webp': 'image/webp',
}

/** `--api chat|responses` (default `chat`); anything else is `CLI_USAGE`. */
export function modelApiOf(command: ParsedCommand): ModelApi | undefined {
  const value = command.string('api')
  if (value === undefined) return undefined
  if (!(MODEL_APIS as readonly string[]).includes(value))
    throw new CliError('CLI_USAGE', `--api must be one of ${MODEL_APIS.join(', ')}, got '${value}'.`)
  return value as ModelApi
}

/** An image to attach to the prompt: its bytes, media type and file name. */
export interface ImageInput {
  readonly bytes: Uint8Array
  readonly mediaType: string
  readonly name: string
}

/**
 * `--image PATH`: the file read whole, its media type from the extension.
 * A missing or unreadable file, a directory, or another extension is
 * `CLI_USAGE`, before the root is touched. The size cap is the
 * persistence's (`SESSION_PERSISTENCE_ATTACHMENT_TOO_LARGE`, nothing
 * appended).
 */
export function imageOf(command: ParsedCommand): ImageInput | undefined {
  const path = command.string('image')
  if (path === undefined) return undefined
  const mediaType = IMAGE_TYPES[extname(path).toLowerCase()]
  if (mediaType === undefined)
    throw new CliError('CLI_USAGE', `--image takes a ${Object.keys(IMAGE_TYPES).join(', ')} file, got '${path}'.`)
  let bytes: Uint8Array
  try {
    if (!statSync(path).isFile()) throw new Error('not a regular file')
    bytes = readFileSync(path)
  } catch (error) {
    throw new CliError('CLI_USAGE', `--image '${path}' cannot be read: ${error instanceof Error ? error.message : String(error)}.`)
  }
  return { bytes, mediaType, name: basename(path) }
}
