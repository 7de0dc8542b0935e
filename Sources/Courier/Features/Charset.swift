// Charset.swift — parameters in other character sets than UTF-8 (HTHttp's stringEncoding) and a
// response's text decoded by its charset. The conversions are the C core's (charset.c, iconv);
// this file passes names and reads the result.

internal import CCore
import Foundation

extension CourierError.Code {
    /// A character set the system's iconv does not know.
    public static let unknownCharset = CourierError.Code(COURIER_E_UNKNOWN_CHARSET)
    /// Text that cannot be converted: a parameter character the chosen charset cannot hold, or a
    /// body whose bytes are not valid in its charset.
    public static let charset = CourierError.Code(COURIER_E_CHARSET)
}

extension CourierError {
    /// See ``Code/unknownCharset``.
    public static let unknownCharset = Code.unknownCharset
    /// See ``Code/charset``.
    public static let charset = Code.charset
}

extension Configuration {
    /// The character set query and form parameters are written in: names and values are
    /// converted from UTF-8 to it before they are percent-encoded ("中" in "GBK" goes as `%D6%D0`).
    /// Any name iconv knows ("GBK", "GB18030", "Shift_JIS", "ISO-8859-1", ...); nil (the default)
    /// is UTF-8. An unknown name fails the engine's open with ``CourierError/Code/unknownCharset``;
    /// a parameter the charset cannot hold fails its send with ``CourierError/Code/charset``.
    public var parameterCharset: String? {
        get { setting("parameterCharset") }
        set {
            setSetting("parameterCharset", newValue) { config, name in
                try CourierError.check(courier_config_set_param_charset(config, name), "parameterCharset '\(name)'")
            }
        }
    }
}

struct _ParameterCharsetOption: RequestOption {
    let name: String
    func apply(to request: OpaquePointer) throws {
        try CourierError.check(courier_request_set_param_charset(request, name), "parameterCharset '\(name)'")
    }
}

extension Request {
    /// The character set of this request's query and form parameters, replacing the engine's
    /// ``Configuration/parameterCharset`` ("UTF-8" too).
    /// - Parameter name: An iconv charset name ("GBK", "Shift_JIS", "UTF-8", ...).
    /// - Returns: The changed request.
    public func parameterCharset(_ name: String) -> Request { adding(_ParameterCharsetOption(name: name)) }
}

extension Response {
    /// The body as text, decoded from the charset its `Content-Type` names (`charset=GBK`), else
    /// from `defaultCharset`, else UTF-8 (`courier_response_text`).
    /// - Parameter defaultCharset: The charset when the response names none; nil means UTF-8.
    /// - Returns: The text.
    /// - Throws: ``CourierError/Code/charset`` for bytes not valid in the charset,
    ///   ``CourierError/Code/unknownCharset`` for a charset iconv does not know.
    public func decodedText(defaultCharset: String? = nil) throws -> String {
        if let storage { return try Response.text(of: storage.pointer, defaultCharset: defaultCharset) }
        // A response made in Swift: the same decoding, over a C response built from its parts.
        var built: OpaquePointer?
        try CourierError.check(courier_response_new(&built, Int32(clamping: max(status, 100))), "response")
        guard let built else { throw CourierError(.noMemory) }
        defer { courier_response_free(built) }
        if let type = header("Content-Type") {
            try CourierError.check(courier_response_add_header(built, "Content-Type", type), "Content-Type")
        }
        try body.withUnsafeBytes { bytes in
            try CourierError.check(courier_response_set_body(built, bytes.baseAddress, bytes.count), "body")
        }
        return try Response.text(of: built, defaultCharset: defaultCharset)
    }

    private static func text(of pointer: OpaquePointer, defaultCharset: String?) throws -> String {
        var text: UnsafeMutablePointer<CChar>?
        var length = 0
        var error = courier_error()
        let rc = withOptionalCString(defaultCharset) { courier_response_text(&text, &length, pointer, $0, &error) }
        guard rc == COURIER_OK.rawValue, let text else { throw CourierError(code: rc, detail: &error) }
        defer { courier_free(text) }
        return String(decoding: UnsafeRawBufferPointer(start: text, count: length), as: UTF8.self)
    }
}
