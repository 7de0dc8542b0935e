// HTTPHeaders.swift — an ordered list of header lines with case-insensitive lookup.

// MARK: - HTTPHeaders

/// Header lines in order, as `(name, value)` pairs; a name may repeat. Lookup by name ignores
/// ASCII case, as HTTP does. Iterate it like an array of pairs, or write it as a literal:
/// `["Accept": "application/json"]` or `[("Accept", "application/json")]`.
public struct HTTPHeaders: Sendable, Equatable, RandomAccessCollection, RangeReplaceableCollection,
    ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral, CustomStringConvertible {
    /// One header line.
    public typealias Element = (name: String, value: String)
    /// Positions are array indices.
    public typealias Index = Int

    var lines: [Element]

    // MARK: Creating

    /// No headers.
    public init() { lines = [] }

    /// Headers from pairs, in order.
    /// - Parameter lines: The header lines.
    public init<S: Sequence>(_ lines: S) where S.Element == Element { self.lines = Array(lines) }

    /// Headers that take an array as it is.
    /// - Parameter lines: The header lines.
    init(lines: [Element]) { self.lines = lines }

    /// Headers from a dictionary, sorted by name so the order is deterministic.
    /// - Parameter dictionary: Names and values.
    public init(_ dictionary: [String: String]) {
        lines = dictionary.sorted { $0.key < $1.key }.map { (name: $0.key, value: $0.value) }
    }

    /// Headers from an array literal of pairs, in order.
    /// - Parameter elements: The header lines.
    public init(arrayLiteral elements: Element...) { lines = elements }

    /// Headers from a dictionary literal, in the literal's order.
    /// - Parameter elements: Names and values.
    public init(dictionaryLiteral elements: (String, String)...) {
        lines = elements.map { (name: $0.0, value: $0.1) }
    }

    // MARK: Collection

    /// The first position.
    public var startIndex: Int { lines.startIndex }
    /// One past the last position.
    public var endIndex: Int { lines.endIndex }

    /// The header line at a position.
    /// - Parameter position: A valid index.
    public subscript(position: Int) -> Element { lines[position] }

    /// Replaces a range of lines (the basis of `append`, `remove(at:)` and the rest).
    /// - Parameters:
    ///   - subrange: The lines to replace.
    ///   - newElements: The new lines.
    public mutating func replaceSubrange<C: Collection>(_ subrange: Range<Int>, with newElements: C)
    where C.Element == Element {
        lines.replaceSubrange(subrange, with: newElements)
    }

    // MARK: Lookup and editing by name

    /// The value of the first line with this name (case-insensitive), or nil.
    /// - Parameter name: A header name.
    public subscript(name: String) -> String? { first(named: name) }

    /// The value of the first line with this name (case-insensitive), or nil.
    /// - Parameter name: A header name.
    /// - Returns: The value, or nil.
    public func first(named name: String) -> String? {
        for line in lines where HTTPHeaders.sameName(line.name, name) { return line.value }
        return nil
    }

    /// Every value of lines with this name (case-insensitive), in order.
    /// - Parameter name: A header name.
    /// - Returns: The values; empty if none.
    public func values(named name: String) -> [String] {
        lines.filter { HTTPHeaders.sameName($0.name, name) }.map(\.value)
    }

    /// Adds a line at the end (a repeated name adds another line).
    /// - Parameters:
    ///   - name: The header name.
    ///   - value: The value.
    public mutating func add(name: String, value: String) { lines.append((name: name, value: value)) }

    /// Removes every line with this name (case-insensitive).
    /// - Parameter name: A header name.
    public mutating func remove(name: String) { lines.removeAll { HTTPHeaders.sameName($0.name, name) } }

    /// Replaces every line with this name by one line with this value, added at the end.
    /// - Parameters:
    ///   - name: The header name.
    ///   - value: The value.
    public mutating func replace(name: String, value: String) {
        remove(name: name)
        add(name: name, value: value)
    }

    // MARK: Equality and description

    /// Whether two lists hold the same lines in the same order (names compared exactly).
    /// - Parameters:
    ///   - lhs: A list.
    ///   - rhs: Another list.
    /// - Returns: Whether they are equal.
    public static func == (lhs: HTTPHeaders, rhs: HTTPHeaders) -> Bool {
        lhs.lines.count == rhs.lines.count && zip(lhs.lines, rhs.lines).allSatisfy { $0 == $1 }
    }

    /// "Name: value" lines joined by newlines.
    public var description: String { lines.map { "\($0.name): \($0.value)" }.joined(separator: "\n") }

    /// ASCII case-insensitive equality of two header names.
    static func sameName(_ a: String, _ b: String) -> Bool {
        var i = a.utf8.makeIterator()
        var j = b.utf8.makeIterator()
        while true {
            switch (i.next(), j.next()) {
            case (nil, nil): return true
            case let (x?, y?):
                if x == y { continue }
                if x | 0x20 != y | 0x20 { return false }
                let lower = x | 0x20
                if lower < UInt8(ascii: "a") || lower > UInt8(ascii: "z") { return false }
            default: return false
            }
        }
    }
}
