// ModelSupport.swift — thin wrappers over the C calls the model helpers use, kept apart so the
// helpers read as Swift.

internal import CCore

func _courierJSONFree(_ value: OpaquePointer) { courier_json_free(value) }

func _courierJSONAppend(_ array: OpaquePointer, _ value: OpaquePointer) -> Int32 {
    courier_json_array_append(array, value)
}

func _courierJSONSet(_ object: OpaquePointer, _ key: String, _ value: OpaquePointer) -> Int32 {
    var key = key
    return key.withUTF8 {
        courier_json_object_set(object, UnsafeRawPointer($0.baseAddress)?.assumingMemoryBound(to: CChar.self), $0.count, value)
    }
}
